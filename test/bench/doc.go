// Command bench is the scale harness of issue 7: for each N of a sweep it
// starts a local control plane (etcd, kube-apiserver with implicit-apiserver's
// authorization webhook) and implicit-apiserver behind the aggregator, builds
// N tenant namespaces in orgs of 100 with G global RoleBindings (G grows
// through the sweep's values on the same cluster), and measures side by side
// on that one cluster
//
//   - propagation of one global edit to N namespace-scoped view watchers and
//     one -A view watcher; the same edits timed, round by round, on N native
//     watchers of the source RoleBinding served by kube-apiserver's watch
//     cache (fieldSelector metadata.name, as many client connections), both
//     fleets opened informer-style and decoding the same minimal fields, with
//     views/native ratios of the medians and of the p99s; and against the copy way (N RoleBinding writes,
//     unthrottled and at a copy controller's QPS 50, until N native watchers
//     and a native -A watcher have them);
//   - the same fan-out with each fleet alone (issue 32): N view watchers, N
//     native watchers, and N watchers of one Flunder of k8s.io/sample-apiserver
//     (etcd-backed, with the apiserver watch cache, behind the same
//     aggregator: the aggregated-path reference), each opened (every
//     watcher a list, then a watch), warmed and timed with the others
//     closed, as a user that is not system:masters (-watch-user),
//     -alone-repeats times interleaved; the time to open each fleet, and
//     CPU profiles of the first openings (-open-profile); with -burst, each
//     fleet also opened as a reconnect storm opens it (every watcher at
//     once, -burst-per-client on a connection, 429s sent again after their
//     Retry-After) and timed again, beside the gentle opening (burst.go,
//     issue 45);
//   - materialization of one global NetworkPolicy (networkpolicies configured
//     with delivery: Materialize, implicit-apiserver at -materialize-qps):
//     its creation, then -materialize-runs edits, each until one native -A
//     watch of the copies (label implicit.dev/materialized=true) has the
//     copy of that edit in every namespace that inherits; time to the last
//     copy, writes per second beside the 32-worker copier's (the same
//     user), and the materializer's own metrics;
//   - lists of one namespace's view against a native list of as many real
//     RoleBindings, and -A lists of the view against native -A lists;
//   - implicit-apiserver's and kube-apiserver's resident memory and live Go
//     heap, per N and G, with and without N open watchers;
//   - watch capacity: heap per open watcher, a never-reading watcher closed
//     as too slow, CPU per delivered event;
//   - a staged change (issue 19): a candidate of global-0 reaching every
//     tenant, then its promotion (two writes), on the view watchers, beside
//     the plain global edit (-promotion-runs);
//   - SubjectAccessReview latency through kube-apiserver, granted by native
//     RBAC and by an inherited binding (implicit-apiserver's webhook).
//
// It prints each figure with median and p99, writes the tables in Markdown
// and JSON under -out and a PNG plot of propagation time against N (-plot).
// A plain-text progress bar goes to stderr. Run it with
//
//	make bench                     # the whole sweep, N in {1000,5000,10000} x G in {10,100}
//	IMPLICIT_TOOLS_BIN=$(hack/build-tools.sh) IMPLICIT_BINARY=$PWD/_output/bin/implicit-apiserver \
//	  go run ./test/bench -short   # a quick look: N=200
//	make bench BENCH_ARGS='-namespaces 2000,10000 -globals 100 -qps50-runs 0'   # only the fan-out sizes of issue 15
//	make bench BENCH_ARGS='-namespaces 2000,10000 -fanout-only'   # only the fan-out, concurrent and alone (issue 32)
//	make bench BENCH_ARGS='-namespaces 2000 -fanout-only -concurrent=false -burst'   # the fleets alone, gentle and burst openings (issue 45)
//	go run ./test/bench -guard-flood  # one tenant floods the guards (issue 24, item 7): the others' latency, the Lease
//	make bench BENCH_ARGS=-replica-switch   # a replica switch at 10,000 x 100 (issue 31): resume against relist (replicaswitch.go)
//	make bench BENCH_ARGS='-edges -implicit-args=--shutdown-delay-duration=5s'   # 10,000 watch opens at once, then SIGTERM with them open and the shutdown's timeline (issue 45, edges.go)
//	make bench BENCH_ARGS='-explain -explain-before <older binary>'   # kubectl explain of a kind the served group gains, fresh and warm kubectl cache (issue 45, explain.go)
//
// Everything runs on loopback, under one deadline (-timeout); the processes
// are stopped on the way out.
//
// It is a module of its own (gonum plot stays out of the product's go.mod)
// and talks to the servers it starts only through kube-apiserver, client-go
// and their /metrics. Of this module it imports internal/controlplane,
// pkg/apis/implicit/v1alpha1 and a few names it configures the servers with
// (pkg/authz's webhook path and match condition, pkg/materialize's Lease
// name); it must not import anything that serves.
package main
