// Package replicas runs two implicit-apiservers behind one APIService, as
// the shipped Deployment's two replicas are, and measures what clients see
// when kube-apiserver sends a list to one and the watch from its
// resourceVersion to the other: whether informer-style clients relist and
// `kubectl get -w` fails. TestRollingRestart restarts both one at a time;
// TestSingleReplicaKill kills a single replica and starts it again;
// TestSingleReplicaRollout rolls a single replica out to a new one.
//
// Each replica runs on a test host of its own, a network namespace joined
// to the root namespace by a veth pair with addresses from 198.51.100.0/24
// (TEST-NET-2), because kube-apiserver's aggregator routing
// (--enable-aggregator-routing=true) dials a Service's endpoints, and
// EndpointSlices refuse loopback addresses. kube-apiserver listens on every
// address of the root namespace so the replicas reach it at their veth's
// far end. The test needs root to create the namespaces and skips without.
//
// The run lasts IMPLICIT_REPLICAS_DURATION (a Go duration; default 40s, for
// `make test`; docs/operations.md's figures are from a 3m run).
//
// It imports of this module only internal/controlplane, internal/netnshost
// and pkg/resourceversion, and must not import the server's packages.
package replicas
