package replicas

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/implicit-dev/implicit-apiserver/internal/netnshost"
)

const (
	// toolsBinEnv names the directory of etcd and kube-apiserver, as
	// printed by hack/build-tools.sh.
	toolsBinEnv = "IMPLICIT_TOOLS_BIN"
	// binaryEnv names the implicit-apiserver binary under test.
	binaryEnv = "IMPLICIT_BINARY"
	// durationEnv sets how long clients watch (a Go duration).
	durationEnv = "IMPLICIT_REPLICAS_DURATION"

	// defaultDuration keeps `make test` short; the figures in
	// docs/operations.md come from IMPLICIT_REPLICAS_DURATION=3m.
	defaultDuration = 40 * time.Second
	// minDuration leaves every client a few renewals.
	minDuration = 10 * time.Second
)

var (
	binDir, binary string
	runDuration    time.Duration
)

func TestMain(m *testing.M) {
	binDir, binary = os.Getenv(toolsBinEnv), os.Getenv(binaryEnv)
	if binDir == "" || binary == "" {
		fmt.Fprintf(os.Stderr, "replica tests need %s and %s: run them with `make integration` (or `make test`)\n", toolsBinEnv, binaryEnv)
		os.Exit(1)
	}
	runDuration = defaultDuration
	if s := os.Getenv(durationEnv); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < minDuration {
			fmt.Fprintf(os.Stderr, "%s=%q: want a Go duration of at least %s\n", durationEnv, s, minDuration)
			os.Exit(1)
		}
		runDuration = d
	}
	os.Exit(m.Run())
}

// hosts are the replicas' hosts: a network namespace each (internal/netnshost).
var hosts = netnshost.Hosts
