package watchmux

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
	"github.com/implicit-dev/implicit-apiserver/pkg/wirehold"
)

// WatchOptions select what a watch receives.
type WatchOptions struct {
	// Resource is the view's resource; Namespace is one namespace or "" for all.
	Resource  string
	Namespace string
	// Name, when set, limits the watch to items of that name.
	Name string
	// ResourceVersion: "" or "0" starts with the current items as ADDED
	// events; a version of any replica with the same fingerprint resumes
	// after it (see Watch); anything else fails with 410 Gone.
	ResourceVersion string
	// SendInitialEvents overrides whether the current items are sent first;
	// when true, a bookmark annotated k8s.io/initial-events-end follows them
	// (watch-list).
	SendInitialEvents *bool
	// AllowBookmarks asks for periodic BOOKMARK events.
	AllowBookmarks bool
	// Matches filters view objects (label and field selectors); nil: all.
	Matches func(obj runtime.Object) bool
	// GroupResource names the view in errors.
	GroupResource schema.GroupResource
}

// watcher is one downstream watch. The fan-out sends on ch (never closed);
// done is closed once, by Stop, to end it; run is the only goroutine that
// writes result, and closes it. run also ends the watch when ctx is done:
// one goroutine per watcher, not a second one waiting on ctx (with 10,000
// watchers, each goroutine's stack costs more than the watcher's heap).
type watcher struct {
	m       *Mux
	ctx     context.Context
	opts    WatchOptions
	startRV uint64
	// startText is the version of the state at startRV, and startVector
	// its vector: a periodic bookmark never names an earlier state.
	startText   string
	startVector []uint64
	initial     []*Event
	// initialFrom, when set, is the state whose items are the initial
	// events (after initial), merged one namespace at a time as they are
	// sent: a watch-list of every namespace.
	initialFrom *Frozen
	// resumeBookmark asks for a bookmark at startText after the initial
	// events of a resume from another replica's version.
	resumeBookmark bool
	// initialEnd asks for the initial-events-end bookmark at startRV.
	initialEnd bool
	ch         chan *Event
	result     chan watch.Event
	done       chan struct{}
	stopOnce   sync.Once
	// connection is the client connection the watch came on, and group
	// its number while open: the fan-out sends to the watchers of one
	// connection together (connection.go).
	connection string
	group      uint64
	// slot is the watcher's index among its namespace's (byNamespace); wmu.
	slot int
	// wire holds the watch request's connection while events are on their
	// way to its handler (wire.go).
	wire wire
}

var _ watch.Interface = &watcher{}

// Watch starts a watch. ctx bounds it as Stop does.
//
// A version of any replica with this one's fingerprint is served: from
// this instance's history when it issued it and still holds the events
// after it, otherwise from the difference between the view at its vector
// (the sources listed at its revisions) and the current one. A version
// ahead of this replica waits until it has caught up, as long as ctx
// allows, up to aheadWait. Another fingerprint, a version that is not one, or one whose
// revisions kube-apiserver has compacted, answer 410 Gone; lists of the
// sources that fail for a passing reason, 429 (watch again).
func (m *Mux) Watch(ctx context.Context, opts WatchOptions) (watch.Interface, error) {
	var want *rv.Version
	if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		v, err := rv.Parse(opts.ResourceVersion)
		if err != nil {
			return nil, gone(opts.ResourceVersion, "is not a version of this server: list again")
		}
		want = &v
	}
	sendInitial := want == nil
	if opts.SendInitialEvents != nil {
		sendInitial = *opts.SendInitialEvents
	}
	var past *resume
	var current *currentCopy
	var history []*Event
	same := false
	for {
		m.mu.RLock()
		if !m.synced {
			m.mu.RUnlock()
			return nil, errNotSynced
		}
		if want == nil {
			break
		}
		if err := m.sameConfigurationLocked(opts.ResourceVersion, *want); err != nil {
			m.mu.RUnlock()
			return nil, err
		}
		if !m.pos.reachesLocked(want.Vector) {
			// Ahead of this replica: wait until its informers catch up.
			m.mu.RUnlock()
			waitCtx, cancel := context.WithTimeout(ctx, aheadWait)
			err := m.waitFor(waitCtx, want.Vector)
			cancel()
			if err != nil {
				return nil, apierrors.NewTimeoutError("resourceVersion "+opts.ResourceVersion+" is newer than this server's", 1)
			}
			continue
		}
		if sendInitial || past != nil {
			break
		}
		// Not across the replacement of a watched namespace: the
		// history holds the old one's events (replaced.go).
		if m.v.ours(want.Seq) && !m.replacedSinceLocked(opts.Namespace, want.Seq) {
			if events, ok := m.hist.sinceLocked(want.Seq, opts.Namespace, (&watcher{opts: opts}).wants); ok {
				history = events
				break
			}
		}
		if want.Mid == nil && m.pos.sameStateLocked(want.Vector) {
			// The client holds the current views: nothing to list or
			// send, whoever issued the version and however long ago.
			same = true
			break
		}
		c := m.pastConfigLocked()
		m.mu.RUnlock()
		p, err := m.pastInTurn(ctx, c, *want, opts.Resource, opts.Namespace, opts.ResourceVersion)
		var refused *pastRefused
		if errors.As(err, &refused) {
			return nil, refused.err
		}
		if err != nil {
			resumeFailures.Inc()
			if passing(err) {
				// The version is within the window: the client retries
				// the watch from it (client-go's reflector retries a 429)
				// instead of relisting.
				return nil, apierrors.NewTooManyRequests(fmt.Sprintf("resourceVersion %s can't be served now (%v): watch again", opts.ResourceVersion, err), 1)
			}
			return nil, gone(opts.ResourceVersion, fmt.Sprintf("can't be served (%v): list again", err))
		}
		if err := m.sameNamespace(p, opts.ResourceVersion, opts.Namespace); err != nil {
			return nil, err
		}
		// The view as the client holds it, merged before taking mu again:
		// under it, only the current views are merged and compared.
		past = m.resumeEvents(p, *want, opts)
	}
	// mu is held for reading.
	w := &watcher{m: m, ctx: ctx, opts: opts, result: make(chan watch.Event), done: make(chan struct{}), connection: connectionOf(ctx)}
	w.wire.s = wirehold.FromContext(ctx)
	// Only a watch-list request (sendInitialEvents=true and
	// allowWatchBookmarks=true) gets the initial-events-end bookmark, as
	// from kube-apiserver's cacher: the watch handler has no completion
	// hook for any other, and a bookmark nobody asked for is a junk row in
	// kubectl's table.
	w.initialEnd = opts.SendInitialEvents != nil && sendInitial && opts.AllowBookmarks
	w.startRV = m.v.current()
	w.startText = m.currentTextLocked()
	w.startVector = m.pos.vector()
	if past != nil {
		past.reads = m.readsLocked(opts.Resource)
	}
	switch {
	case sendInitial && opts.Namespace == "":
		// Every namespace (an informer's watch-list): merging each of them
		// under mu held every change, and every request queued behind one,
		// for a second at 10,000 namespaces, and holding them all would
		// cost the namespaces × inherited items. Their inputs are frozen
		// here, at startRV (shared by the watch-lists and lists at the
		// same state), and merged one namespace at a time as they are sent.
		w.initialFrom = m.freezeLocked(opts.Resource)
	case sendInitial:
		w.initial = m.snapshotLocked(opts, w.startRV, w.startText)
	case same:
		// Nothing to send; a bookmark says so when asked for.
		w.resumeBookmark = w.opts.AllowBookmarks
		resumedFromVector.Inc()
	case history != nil:
		w.initial = history
	case past != nil && opts.Namespace == "":
		// Every namespace: what the current views are merged from is
		// copied here, at startRV, and they are merged and compared once
		// mu is released (the watcher, registered, buffers what follows).
		current = m.currentCopyLocked(opts.Resource)
	case past != nil:
		w.resumed(past, past.eventsIn(m.st))
	}
	size := m.opts.BufferSize
	if opts.Namespace == "" {
		size = max(10*size, 2*len(m.st.namespaces))
	}
	w.ch = make(chan *Event, size)
	m.wmu.Lock()
	if m.closed {
		// Run has ended every watcher: the server is shutting down. A
		// watch that reaches this point later (its request was accepted
		// before, then waited for a resume, an authorization, a CPU)
		// would hold the HTTP server's graceful shutdown until its
		// timeout; it is told to watch again, from its version, as
		// k8s.io/apiserver tells a watch that arrives during shutdown.
		m.wmu.Unlock()
		m.mu.RUnlock()
		return nil, errShuttingDown
	}
	m.addWatcherLocked(w)
	// Counted when registered: Stop, which may come before run starts (a
	// slow-close during the initial merge below), counts it out.
	openWatchers.Inc()
	m.wmu.Unlock()
	m.mu.RUnlock()
	switch {
	case current != nil:
		w.resumed(past, past.eventsIn(current.build()))
	}

	go w.run()
	return w, nil
}

// errShuttingDown answers a watch that comes after Run ended: a 429 with
// Retry-After, which client-go's reflector retries from the same version
// (isWatchErrorRetriable) and kube-apiserver's aggregator passes on; the
// retry reaches another replica, or this one's successor.
var errShuttingDown = apierrors.NewTooManyRequests("the server is shutting down: watch again", 1)

// resumed makes events, which take the client from its version (another
// replica's) to the view at startRV, the initial events. Each carries the
// version of the state the client holds after it (a client cut off among
// them resumes from the last it received and gets the rest only), the last
// startRV's; a bookmark follows when asked for.
func (w *watcher) resumed(r *resume, events []*Event) {
	r.versions(events, w.startVector, w.startText, w.startRV)
	w.initial = events
	w.resumeBookmark = w.opts.AllowBookmarks
	resumedFromVector.Inc()
}

// passing reports whether err, from listing the sources at a version, is
// a passing failure of kube-apiserver or of the network (a timeout, a 429,
// a 500 or 503, a refused or cut connection), or lists that outlasted the
// request's wait (errPastWait), not an answer about the version
// (compacted: 410).
func passing(err error) bool {
	return errors.Is(err, errPastWait) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || errors.Is(err, context.DeadlineExceeded) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err)
}

// sameConfigurationLocked answers 410 Gone for a version issued under
// other merge semantics or another configuration than this replica's (a
// rollout changed them): no difference computed under these rules serves
// it. Called with mu held.
func (m *Mux) sameConfigurationLocked(version string, want rv.Version) error {
	if want.Fingerprint != m.st.fingerprint(m.pos) || len(want.Vector) != len(m.pos.sortedKeys()) {
		return gone(version, "was issued under other merge semantics or configuration (a rollout changed them): list again")
	}
	return nil
}

func gone(version, why string) error {
	return apierrors.NewResourceExpired("resourceVersion " + version + " " + why)
}

// snapshotLocked returns the current items as ADDED events at rv.
func (m *Mux) snapshotLocked(opts WatchOptions, rv uint64, text string) []*Event {
	return snapshotOf(m.st, opts, rv, text)
}

// snapshotOf returns st's items as ADDED events at rv.
func snapshotOf(st *state, opts WatchOptions, rv uint64, text string) []*Event {
	namespaces := []string{opts.Namespace}
	if opts.Namespace == "" {
		namespaces = st.namespaceNames()
	}
	var out []*Event
	for _, ns := range namespaces {
		for _, r := range st.results(opts.Resource, ns, opts.Name) {
			out = append(out, &Event{RV: rv, text: text, Type: watch.Added, Resource: opts.Resource, Namespace: ns, Name: r.Item.Name, Result: r})
		}
	}
	return out
}

// emitFrozen sends initialFrom's items as ADDED events at startRV, in the
// order snapshotOf sends them, and forgets it; false when the watcher
// stopped.
func (w *watcher) emitFrozen() bool {
	f := w.initialFrom
	if f == nil {
		return true
	}
	w.initialFrom = nil
	for _, ns := range f.names {
		for _, r := range f.Results(ns, w.opts.Name) {
			e := &Event{RV: w.startRV, text: w.startText, Type: watch.Added, Resource: w.opts.Resource, Namespace: ns, Name: r.Item.Name, Result: r}
			if !w.emit(e) {
				return false
			}
		}
	}
	return true
}

// wants reports whether e is for this watcher's resource, namespace and name.
func (w *watcher) wants(e *Event) bool {
	return e.Resource == w.opts.Resource &&
		(w.opts.Namespace == "" || e.Namespace == w.opts.Namespace) &&
		(w.opts.Name == "" || e.Name == w.opts.Name)
}

// ResultChan implements watch.Interface.
func (w *watcher) ResultChan() <-chan watch.Event { return w.result }

// Stop implements watch.Interface.
func (w *watcher) Stop() {
	w.stopOnce.Do(func() {
		close(w.done)
		w.m.wmu.Lock()
		w.m.removeWatcherLocked(w)
		w.m.wmu.Unlock()
		openWatchers.Dec()
	})
}

// run sends the initial events, then the live ones, until stopped or its
// context is done.
func (w *watcher) run() {
	defer close(w.result)
	defer w.wire.stop()
	defer w.Stop() // when ctx ends it; a no-op after Stop
	for _, e := range w.initial {
		if !w.emit(e) {
			return
		}
	}
	w.initial = nil
	if !w.emitFrozen() {
		return
	}
	if w.initialEnd || w.resumeBookmark {
		if !w.send(w.bookmark(w.startText, w.initialEnd)) {
			return
		}
	}
	for {
		select {
		case e := <-w.ch:
			ok := w.emit(e)
			w.wire.release(false)
			if !ok {
				return
			}
		case <-w.done:
			return
		case <-w.ctx.Done():
			return
		}
	}
}

// emit turns e into the watch event this watcher sees, if any, and sends it.
func (w *watcher) emit(e *Event) bool {
	if e.Type == watch.Bookmark {
		return w.send(w.bookmark(e.Version(), false))
	}
	if e.batch != nil {
		// A watcher of every namespace expands a batch here, in its own
		// goroutine, not in the fan-out.
		return e.batch.expand(e.after, func(member *Event) bool {
			return !w.wants(member) || w.emit(member)
		})
	}
	obj, err := w.m.object(e, e.Result)
	if err != nil {
		klog.ErrorS(err, "Building a view item", "resource", e.Resource, "namespace", e.Namespace, "name", e.Name)
		return true
	}
	typ := e.Type
	if w.opts.Matches != nil {
		now := w.opts.Matches(obj)
		before, prevObj := now, obj
		if e.Old != nil {
			prev, err := w.m.object(e, *e.Old)
			if err == nil {
				before, prevObj = w.opts.Matches(prev), prev
			}
		}
		switch {
		case typ == watch.Modified && now && !before:
			typ = watch.Added
		case typ == watch.Modified && !now && before:
			// The item as it last matched, at the event's version, as
			// kube-apiserver's watch cache sends it: the client's selector
			// still holds for what it deletes.
			typ, obj = watch.Deleted, prevObj
		case !now && !before, !now && typ != watch.Modified:
			return true
		}
	}
	if w.send(watch.Event{Type: typ, Object: obj}) {
		eventsDelivered.Inc()
		return true
	}
	return false
}

// send hands ev to the watch handler; the handler's next flush ends the
// hold on the connection it is given with it (wire.go).
func (w *watcher) send(ev watch.Event) bool {
	handing := w.wire.s != nil && w.wire.s.Handing()
	select {
	case w.result <- ev:
		return true
	case <-w.done:
	case <-w.ctx.Done():
	}
	if handing {
		w.wire.s.NotHanded()
	}
	return false
}

func (w *watcher) bookmark(version string, initialEnd bool) watch.Event {
	obj := w.m.objects.Empty(w.opts.Resource)
	if acc, err := meta.Accessor(obj); err == nil {
		acc.SetResourceVersion(version)
		if initialEnd {
			acc.SetAnnotations(map[string]string{"k8s.io/initial-events-end": "true"})
		}
	}
	return watch.Event{Type: watch.Bookmark, Object: obj}
}

// object builds the view object of r for e, stamped with e's version.
func (m *Mux) object(e *Event, r merge.Result) (runtime.Object, error) {
	if b, ok := m.objects.(BatchObjects); ok && e.member {
		return b.BatchItem(e.Resource, e.Namespace, r, e.Version())
	}
	return m.objects.Item(e.Resource, e.Namespace, r, e.Version())
}

// addWatcherLocked indexes w by its namespace. Called with wmu held.
func (m *Mux) addWatcherLocked(w *watcher) {
	m.watchers[w] = struct{}{}
	m.joinConnectionLocked(w)
	if w.opts.Namespace == "" {
		m.allNamespaces[w] = struct{}{}
		return
	}
	ws := m.byNamespace[w.opts.Namespace]
	w.slot = len(ws)
	m.byNamespace[w.opts.Namespace] = append(ws, w)
}

// removeWatcherLocked drops w from the indexes. Called with wmu held.
func (m *Mux) removeWatcherLocked(w *watcher) {
	if _, ok := m.watchers[w]; !ok {
		return
	}
	m.leaveConnectionLocked(w)
	delete(m.watchers, w)
	if w.opts.Namespace == "" {
		delete(m.allNamespaces, w)
		return
	}
	// The namespace's last watcher takes w's slot.
	ws := m.byNamespace[w.opts.Namespace]
	last := ws[len(ws)-1]
	ws[w.slot], last.slot = last, w.slot
	ws[len(ws)-1] = nil
	if ws = ws[:len(ws)-1]; len(ws) == 0 {
		delete(m.byNamespace, w.opts.Namespace)
	} else {
		m.byNamespace[w.opts.Namespace] = ws
	}
}
