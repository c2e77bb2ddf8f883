// Package sourcefeed tells the consumer of a shared informer at which etcd
// revision the state its handler has been given is complete.
//
// A client-go informer hands its handlers objects, never the revision of a
// list or a bookmark, and after a relist it delivers the list's changes in
// key order, with inferred deletions carrying old revisions: the highest
// revision delivered so far is not a state etcd ever held. A Tracker wraps the
// informer's ListerWatcher, sees every list, watch event and bookmark in the
// reflector's order, models the informer's store to know how many handler
// deliveries each one makes, and regroups the deliveries for its Sink: one
// watch event at its own revision, a whole relist as one change at the
// list's revision, a bookmark as progress, a list that changed nothing as
// listed (complete at its revision, the writes it skipped unknown). It builds on client-go's
// RealFIFO delivery order (InOrderInformers, AtomicFIFO) and replaces
// nothing of the informer: every other handler and lister of it is unchanged.
//
// It also feeds the sources in: TrackInformers registers the built-in kinds'
// and the namespaces' tracked informers in a client-go informer factory
// (informers.go), NamespacesAt lists the namespaces at a past revision
// (listat.go), and HubHealth probes the hub cluster of the global sources and
// says since when they are stale (hub.go). It is the first link of the chain
// sources -> merge -> views -> clients and must not import any package of
// this module.
package sourcefeed
