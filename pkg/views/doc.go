// Package views computes implicit views on read: for a namespace and a
// resource it resolves the namespace's lineage and the source items of every
// scope from informer caches, merges them with pkg/merge, and returns view
// items with their provenance (scope and source labels, source uid and
// resourceVersion annotations, conflicts, a stable uid).
//
// Serving one namespace costs work proportional to its depth and to the
// items of its scopes, never to the number of namespaces: source items are
// read through the informers' namespace index.
//
// It also reports hierarchy problems (cycles, missing parents) as a metric,
// log lines and Events on the namespaces concerned.
package views
