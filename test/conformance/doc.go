// Package conformance is a differential suite: it sends the same list and
// watch requests to kube-apiserver for native rbac.authorization.k8s.io/v1
// RoleBindings and to the rolebindings.implicit.dev view of the same
// namespace, whose view holds the same names (the namespace's local
// RoleBindings), makes the same change, and compares what comes back:
// status codes and reasons, event types and order, bookmarks, the
// initial-events-end annotation, list metadata. It also drives kubectl and
// client-go informers against the view as a user's tools do.
//
// Where a view must differ from kube-apiserver (its resourceVersions are its
// own numbers, its items' uids are derived from the source's), a case
// compares the shape rather than the value and says so by name; see
// docs/design.md, "Where views differ from kube-apiserver".
//
// It runs against the real thing: etcd, kube-apiserver and implicit-apiserver
// behind the aggregation layer, started by TestMain with internal/controlplane.
//
// It imports of this module only internal/controlplane, the test helpers and
// pkg/resourceversion, and must not import the server's packages: it sees
// what a client sees.
package conformance
