package controlplane

import (
	"fmt"
	"net"
	"sync"
)

// handedOut remembers every port FreePort returned in this process, so that
// two control planes in one test binary never get the same port even though
// neither has bound it yet.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on right now
// and that this process has not handed out before. Another process may still
// take it before the caller binds it; the window is short on a developer's
// machine and a failure to bind is reported with the log of the process
// that failed.
func FreePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("finding a free port on 127.0.0.1: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if err := l.Close(); err != nil {
			return 0, fmt.Errorf("releasing port %d: %w", port, err)
		}
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("finding a free port on 127.0.0.1: every port offered was already handed out")
}
