// Package v1alpha1 holds the API types of implicit.dev/v1alpha1 that are not
// views: the answers the server gives about the views. Hierarchy (one per
// namespace: its ancestors, children and hierarchy problems), and the
// create-only reviews Explanation (why an item is or is not in a view) and
// Preview (what an edit of a source would change, namespace by namespace),
// and RulesReview (the rules a user inherits in a namespace).
//
// The view kinds themselves reuse their sources' Go types and are registered
// by pkg/apiserver. These types are hand-written, with hand-written deep
// copies (deepcopy.go) and OpenAPI definitions (openapi.go), so the module
// needs no code generator.
package v1alpha1
