// Command bench is the scale harness of issue 7 (groundwork): it starts a
// local control plane and implicit-apiserver behind the aggregator, builds a
// hierarchy of N tenant namespaces in orgs of 100 with G global
// RoleBindings, and measures side by side on that one cluster
//
//   - propagation of one global edit to N namespace-scoped view watchers and
//     one -A view watcher, against the copy way (N RoleBinding writes, at
//     QPS 500 and at a copy controller's QPS 50, until N native watchers
//     have them);
//   - lists of one namespace's view against a native list of as many real
//     RoleBindings, and the -A view list;
//   - implicit-apiserver's and kube-apiserver's resident memory.
//
// Run it with
//
//	IMPLICIT_TOOLS_BIN=$(hack/build-tools.sh) IMPLICIT_BINARY=$PWD/_output/bin/implicit-apiserver \
//	  go run ./test/bench -short
//
// Everything runs on loopback, under one deadline (-timeout); the processes
// are stopped on the way out.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

type options struct {
	binDir, binary  string
	namespaces      int
	globals         int
	runs            int
	short           bool
	timeout         time.Duration
	keepWorkDir     bool
	watchersPerConn int
}

func main() {
	var o options
	flag.StringVar(&o.binDir, "bin-dir", os.Getenv("IMPLICIT_TOOLS_BIN"), "directory of etcd, kube-apiserver, kube-controller-manager (what hack/build-tools.sh prints)")
	flag.StringVar(&o.binary, "implicit-binary", os.Getenv("IMPLICIT_BINARY"), "implicit-apiserver binary")
	flag.IntVar(&o.namespaces, "namespaces", 1000, "tenant namespaces N (plus N/100 orgs)")
	flag.IntVar(&o.globals, "globals", 10, "global RoleBindings G")
	flag.IntVar(&o.runs, "runs", 3, "repetitions R of each measurement")
	flag.BoolVar(&o.short, "short", false, "a quick look: N=200, G=10, R=3 (flags given explicitly win)")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "deadline of the whole run")
	flag.BoolVar(&o.keepWorkDir, "keep", false, "keep the control plane's work directory (logs) after a successful run")
	flag.IntVar(&o.watchersPerConn, "watchers-per-client", 200, "watchers sharing one rest client (one HTTP/2 connection)")
	flag.DurationVar(&roundTimeout, "round-timeout", roundTimeout, "deadline of one propagation round")
	flag.Parse()
	if o.short {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["namespaces"] {
			o.namespaces = 200
		}
		if !set["globals"] {
			o.globals = 10
		}
		if !set["runs"] {
			o.runs = 3
		}
	}
	if o.binDir == "" || o.binary == "" {
		fmt.Fprintln(os.Stderr, "bench needs -bin-dir (or IMPLICIT_TOOLS_BIN) and -implicit-binary (or IMPLICIT_BINARY)")
		os.Exit(2)
	}
	if o.namespaces < 1 || o.globals < 1 || o.runs < 1 || o.watchersPerConn < 1 {
		fmt.Fprintln(os.Stderr, "-namespaces, -globals, -runs and -watchers-per-client must be positive")
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	err := run(ctx, o)
	cancel()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
