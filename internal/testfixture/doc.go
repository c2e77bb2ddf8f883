// Package testfixture holds the test builders shared across packages: the
// Namespace objects the unit tests of pkg/watchmux, pkg/views, pkg/authz,
// pkg/hierarchy, pkg/admission and pkg/materialize build, the RoleBindings
// and Roles of pkg/watchmux, pkg/views and pkg/admission (rbac.go), the
// RoleBinding overlayer of the real rbac/v1 schema (pkg/merge, pkg/authz),
// and the Guardrail kind of the integration and fleet suites: one set of
// builders instead of a copy per package.
//
// It builds on pkg/apis/implicit/v1alpha1, pkg/merge and pkg/watchmux, and
// must not import anything above them (pkg/views, pkg/registry,
// pkg/admission, pkg/apiserver): the tests of those packages import it. No
// code but tests imports it.
package testfixture
