// Package servedgroup builds and swaps the served group version,
// implicit.dev/v1alpha1: its scheme, its codec for kinds served from
// unstructured objects, its read-only filter, and its OpenAPI definitions
// drawn from the host's schemas of the source kinds. Because kinds appear
// while the server runs (a CRD created after it started), the group is not
// installed once with InstallAPIGroup: each change of the served kinds
// installs the whole group version with k8s.io/apiserver's own installer
// into a new go-restful container and swaps it in atomically, as
// k8s.io/apiextensions-apiserver does for custom resources. Plain and
// aggregated discovery and the OpenAPI v2 and v3 documents are updated
// alongside. It takes finished storages: which kinds are served is
// pkg/kindcontroller's business, and each view's storage pkg/registry's.
//
// It imports pkg/kinds and pkg/apis/implicit/v1alpha1 only of this module,
// and must not import pkg/registry, pkg/kindcontroller or pkg/apiserver.
package servedgroup
