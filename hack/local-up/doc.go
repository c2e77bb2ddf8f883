// Command local-up runs implicit-apiserver behind a local control plane on
// 127.0.0.1, for `make run`: etcd (empty on every run), kube-apiserver with
// the aggregation layer, optionally kube-controller-manager, and
// implicit-apiserver registered as the APIService v1alpha1.implicit.dev,
// running as its ServiceAccount with exactly the RBAC artifacts/base ships.
// It applies the examples, waits until `kubectl get implicit` works with an
// empty discovery cache, prints how to use the cluster with kubectl, and
// stays in the foreground until interrupted, then stops everything it
// started.
//
//	go run ./hack/local-up --bin-dir="$(hack/build-tools.sh)" --implicit-binary=_output/bin/implicit-apiserver
//
// With --fleet (`make run-fleet`) it runs a fleet instead: a hub cluster
// holding the global sources, guarded by an implicit-apiserver of its own
// (--fleet-hub) that knows the registered members, and two member clusters,
// each with an implicit-apiserver that reads them from the hub (see
// fleet.go).
//
// It builds on internal/controlplane, and imports of the product only
// pkg/authz (the authorization webhook's path and match condition),
// pkg/kinds (the built-in kinds) and pkg/apis/fleet/v1alpha1 (a member's
// registration); it runs the server as a separate process
// and must not import its wiring (pkg/apiserver, pkg/cmd/server).
package main
