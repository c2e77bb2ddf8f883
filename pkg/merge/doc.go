// Package merge owns implicit-apiserver's merge semantics, free of I/O. It
// resolves a namespace's lineage from its labels and combines the items of
// the global scope, its ancestors and its own into one view: precedence,
// exclusions, locks, overlays and staged candidates. Callers pass namespaces
// and source items in, and get back which source wins each name, at which
// scope, and what a lock blocked.
//
// Ancestors are resolved from the implicit.dev/parent label, nearest first,
// at most Policy.MaxDepth of them; cycles, missing parents and parents that
// are not the namespace the label meant (implicit.dev/parent-uid) are
// reported, never followed. It knows nothing of HTTP or informers.
//
// The Overlay strategy merges lower-scope objects onto the inherited one
// field by field (NewOverlayer, overlay.go). It builds on
// sigs.k8s.io/structured-merge-diff, server-side apply's engine, with the
// kind's OpenAPI schema converted by kube-openapi's schemaconv: each locked
// layer is a field manager, and merge.Updater.Apply without force finds the
// fields a lower layer may not change. Objects stay opaque everywhere else.
//
// Staged rollout (candidate.go): a candidate source (implicit.dev/candidate-for
// and implicit.dev/canary-selector, parsed by ParseCandidate) stands in for the
// stable source of its namespace in the views of the namespaces whose
// implicit.dev/stage label its selector matches. StageLevels applies that rule
// to a view's levels before MergeWith merges them, so locks, shadows,
// exclusions and overlays treat the candidate as the source it stands in for;
// Levels applies it for the viewing namespace.
//
// It imports pkg/apis/implicit/v1alpha1 only of this module (the label and
// annotation names), and must not import pkg/watchmux, pkg/views,
// pkg/registry or anything else that serves.
package merge
