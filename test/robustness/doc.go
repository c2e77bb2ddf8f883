// Package robustness tries to break the views' watch contract on real
// servers, in the spirit of etcd's robustness tests: etcd, kube-apiserver
// compacting every few seconds, kube-controller-manager (so namespace
// deletion completes) and two implicit-apiserver replicas behind the
// aggregator, while a seeded random writer changes everything the views
// read and faults kill, pause and restart replicas, restart kube-apiserver
// (its watch cache cold) and cut the clients' watches.
//
// Clients spread over both replicas through kube-apiserver: client-go
// informers with and without watch-list, `kubectl get -w`-style watchers
// that resume from the last version they saw, and paginated lists of two
// items a page. At quiet points and at the end every client must hold what
// a fresh list returns, with no ADDED for an item it held, no MODIFIED or
// DELETED for one it did not, and versions that never go back in a stream.
//
// `make test` runs it for 90 seconds; IMPLICIT_ROBUSTNESS_DURATION sets
// another length (make robustness: 30 minutes), IMPLICIT_ROBUSTNESS_SEED
// replays a seed's choices (the timing of the servers is not replayed), and
// IMPLICIT_ROBUSTNESS_COMPACTION sets kube-apiserver's
// --etcd-compaction-interval (default 10s). Like
// test/replicas it runs each replica in a network namespace of its own and
// needs root; it shares test/replicas' host names and lock, so the two take
// turns.
//
// It imports of this module only internal/controlplane, internal/netnshost
// and pkg/resourceversion, and must not import the server's packages.
package robustness
