// Package registry serves implicit-apiserver's view resources over the
// generic API server: one read-only storage per view resource
// (rolebindings.implicit.dev, roles.implicit.dev, ...), typed for the default
// kinds and unstructured for any other (with a CRD's printer columns,
// evaluated here), with get, list, label and field selectors, and table
// output. Each storage presents the one kinds.Kind it is made with.
//
// It reuses k8s.io/apiserver's REST machinery (rest.Getter, rest.Lister,
// rest.TableConvertor) and replaces its etcd-backed store with a Viewer that
// computes view items on read. It knows nothing of how views are merged: the
// Viewer interface, defined here where it is used, is all it sees. The
// question resources beside the views (hierarchies, explanations, previews,
// rulesreviews) read their answers through interfaces defined here too:
// pkg/answers, and the authorization webhook's RulesFor (pkg/authz,
// whose InheritedBinding type it converts). The policy reviews read the
// host's admission policies through NewHostAdmissionPolicies
// (hostpolicies.go), informers started by the first review.
//
// It must not import pkg/merge, pkg/watchmux, pkg/views or pkg/apiserver:
// what it serves comes in through the interfaces it declares.
package registry
