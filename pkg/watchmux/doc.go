// Package watchmux owns the mirror of the host cluster's namespaces and
// source objects, fed by one informer per source kind and one for
// namespaces, and the Reader through which every consumer reads views and
// the basic facts they are merged from (pkg/merge does the merging).
// It owns the view events: every change is turned into the ADDED, MODIFIED
// and DELETED events of exactly the views it changes, stamped with
// resourceVersions that carry this instance's id (rv.go) and kept in a
// bounded history for resuming watches.
// It owns the fan-out of those events to any number of watchers through
// bounded buffers, in version order, closing a watcher that can't keep up
// (the locks and goroutines are written on the Mux type).
//
// It builds on pkg/sourcefeed, pkg/merge, pkg/resourceversion and
// pkg/accessreview (the fair turns of past states, pastfair.go), and must
// not import pkg/views, pkg/registry, pkg/admission, pkg/authz or
// pkg/apiserver: those read it.
package watchmux
