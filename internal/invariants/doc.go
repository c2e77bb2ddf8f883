// Package invariants holds the model-based test of the guards' four
// invariants (DESIGN.md, "Guards"): random actors play random sequences of
// changes through every admission webhook of pkg/admission as kube-apiserver
// calls them, over a real watchmux mirror that lags behind the writes, and
// after every admitted change the test checks locks, grants (pkg/authz
// against an RBAC oracle of its own), materialized copies and the guards'
// memory. It builds on the real guards, mirror and authorizer and replaces
// kube-apiserver, etcd, RBAC and the materializer with small models; the
// package has no code outside its tests (see invariants_test.go).
//
// Nothing imports it.
package invariants
