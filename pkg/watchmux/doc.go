// Package watchmux multiplexes the host cluster's watches into implicit
// views: one informer per source kind and one for namespaces feed a mirror
// of the sources, every change is turned into the ADDED, MODIFIED and
// DELETED events of exactly the views it changes, and those events fan out
// to any number of downstream watchers through bounded buffers.
//
// Concurrency: informer handlers call OnNamespace and OnSource, which take
// the state lock, compute the change's view events from the state before and
// after it (pkg/merge does the merging), stamp each with the next
// resourceVersion, append them to a bounded history and take a ticket, then
// release the state lock and wait for their ticket's turn to fan out: events
// reach watchers in resourceVersion order, and reads (Mux.Read) and the
// next changes' computation never wait for a fan-out. Fan-out first tries
// a non-blocking send to every watcher, then waits for the slow ones within a
// shared time budget, then closes those still full: a stuck client never
// delays the others, and reconnects with its last resourceVersion.
//
// Memory holds the sources, the namespaces, each namespace's resolved
// lineage (at most --max-depth ancestors, dropped for a namespace's subtree
// when it changes), the history and the watchers: never a namespace ×
// inherited item product. View objects are built on
// demand (see pkg/views).
//
// resourceVersions are decimal integers that carry a random instance id in
// their high bits (see rv.go): a version issued by another replica or an
// earlier run is recognised and answered with 410 Gone.
package watchmux
