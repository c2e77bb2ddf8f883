package robustness

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/implicit-dev/implicit-apiserver/internal/netnshost"
)

const (
	toolsBinEnv   = "IMPLICIT_TOOLS_BIN"
	binaryEnv     = "IMPLICIT_BINARY"
	durationEnv   = "IMPLICIT_ROBUSTNESS_DURATION"
	seedEnv       = "IMPLICIT_ROBUSTNESS_SEED"
	compactionEnv = "IMPLICIT_ROBUSTNESS_COMPACTION"

	// defaultDuration keeps `make test` at about two minutes with the
	// set-up and the checks.
	defaultDuration = 90 * time.Second
	minDuration     = 20 * time.Second
	// defaultCompaction is kube-apiserver's --etcd-compaction-interval.
	defaultCompaction = 10 * time.Second
)

var (
	binDir, binary string
	runDuration    time.Duration
	compaction     time.Duration
	seed           uint64
	seedGiven      bool
)

func TestMain(m *testing.M) {
	binDir, binary = os.Getenv(toolsBinEnv), os.Getenv(binaryEnv)
	if binDir == "" || binary == "" {
		fmt.Fprintf(os.Stderr, "robustness tests need %s and %s: run them with `make integration` (or `make test`)\n", toolsBinEnv, binaryEnv)
		os.Exit(1)
	}
	var err error
	if runDuration, err = durationFrom(durationEnv, defaultDuration, minDuration); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if compaction, err = durationFrom(compactionEnv, defaultCompaction, time.Second); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	seed = uint64(time.Now().UnixNano())
	if s := os.Getenv(seedEnv); s != "" {
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			fmt.Fprintf(os.Stderr, "%s=%q: want an unsigned integer\n", seedEnv, s)
			os.Exit(1)
		}
		seedGiven = true
	}
	os.Exit(m.Run())
}

func durationFrom(env string, def, least time.Duration) (time.Duration, error) {
	s := os.Getenv(env)
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < least {
		return 0, fmt.Errorf("%s=%q: want a Go duration of at least %s", env, s, least)
	}
	return d, nil
}

// hosts are the replicas' hosts: a network namespace each (internal/netnshost).
var hosts = netnshost.Hosts
