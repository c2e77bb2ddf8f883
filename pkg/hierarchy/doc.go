// Package hierarchy reports the problems of the namespace hierarchy: parent
// cycles, missing or invalid parents, parent uid mismatches and namespaces
// deeper than the policy's cap, as the implicit_hierarchy_problem_namespaces gauge, log
// lines and Warning Events on the namespaces concerned.
//
// It builds on a namespace informer and on pkg/merge's Resolve, the same
// lineage the views inherit along; it only reads, and changes nothing that
// is served.
//
// It imports pkg/merge only of this module, and must not import
// pkg/watchmux, pkg/views or pkg/apiserver.
package hierarchy
