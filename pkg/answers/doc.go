// Package answers computes the answers of implicit.dev's question
// resources, which pkg/registry serves: where a namespace stands in the
// hierarchy (Hierarchy), why a name is or is not in a view (Explain), and
// what an edit of a source would change in the views (Preview).
//
// It reads the mirror through watchmux's Reader, each answer inside one
// Mux.Read, and merges with pkg/merge, the code the views are merged with:
// an answer is what the views show, never a second model of them.
//
// It builds on pkg/merge and pkg/watchmux and must not import pkg/registry
// (which declares the interfaces it satisfies), pkg/views or pkg/apiserver.
package answers
