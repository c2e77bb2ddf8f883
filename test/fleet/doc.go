// Package fleet tests global sources on a hub cluster end to end: one etcd,
// a hub kube-apiserver and two member kube-apiservers (distinct etcd
// prefixes), and an implicit-apiserver per member reading the hub's global
// namespace (--global-kubeconfig), each behind its member's aggregation
// layer. Member-2 reaches the hub through a TCP relay the tests can cut, to
// partition it from a hub that stays editable. The servers run with
// testdata/implicit-config.yaml, which adds a CRD of the suite's own whose
// global sources are read from the hub.
//
// It imports of this module only internal/controlplane and the test helpers,
// and must not import the server's packages.
package fleet
