// Package views serves implicit views from the watch multiplexer
// (pkg/watchmux): it reads the merge results of a namespace's view, or
// watches them, and turns each into a view item with its provenance (scope
// and source labels, source uid and resourceVersion annotations, conflicts,
// a stable uid) at the server's resourceVersion. Items of watch events are
// built once and shared by every watcher that sends them (cached.go).
//
// Serving one namespace costs work proportional to its depth and to the
// items of its scopes, never to the number of namespaces. Hierarchy problems
// are reported by pkg/hierarchy.
//
// It builds on pkg/watchmux and pkg/merge, and implements pkg/registry's
// Viewer; it must not import pkg/kindcontroller, pkg/admission, pkg/authz or
// pkg/apiserver.
package views
