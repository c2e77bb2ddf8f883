package watchmux

import (
	"sync"

	"github.com/implicit-dev/implicit-apiserver/pkg/wirehold"
)

// A watch request's connection holds its writes while events are on their
// way to that connection's watchers, and writes them together once their
// handlers have flushed them (pkg/wirehold: one write call per connection
// and fan-out instead of one per event). The fan-out holds it for each
// event it puts in a watcher's buffer; run passes the hold to the handler
// with the event it turns into (Stream.Handing), and ends the buffer's.

// wire is a watcher's holds on its connection: one per event in its
// buffer. Its zero value (no Stream: a watch not served over a held
// connection) does nothing.
type wire struct {
	s       *wirehold.Stream
	mu      sync.Mutex
	held    int
	stopped bool
}

// hold holds the connection for an event about to be put in the buffer;
// false when the watcher has stopped (run is no longer there to end it).
func (c *wire) hold() bool {
	if c.s == nil {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false
	}
	c.held++
	c.s.Hold()
	return true
}

// release ends one hold: its event was taken out of the buffer and handed
// on, or never put in it. later: by another goroutine (the fan-out's must
// not wait for a connection).
func (c *wire) release(later bool) {
	if c.s == nil {
		return
	}
	c.mu.Lock()
	if c.held == 0 {
		c.mu.Unlock()
		return
	}
	c.held--
	c.mu.Unlock()
	if later {
		c.s.ReleaseLater()
	} else {
		c.s.Release()
	}
}

// stop ends every hold: the events left in the buffer will not be sent.
func (c *wire) stop() {
	if c.s == nil {
		return
	}
	c.mu.Lock()
	n := c.held
	c.held = 0
	c.stopped = true
	c.mu.Unlock()
	for range n {
		c.s.ReleaseLater()
	}
}
