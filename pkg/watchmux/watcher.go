package watchmux

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// WatchOptions select what a watch receives.
type WatchOptions struct {
	// Resource is the view's resource; Namespace is one namespace or "" for all.
	Resource  string
	Namespace string
	// Name, when set, limits the watch to items of that name.
	Name string
	// ResourceVersion: "" or "0" starts with the current items as ADDED
	// events; a version of this instance resumes after it; another
	// instance's, or one older than the history, fails with 410 Gone.
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
	initial []*Event
	// initialEnd asks for the initial-events-end bookmark at startRV.
	initialEnd bool
	ch         chan *Event
	result     chan watch.Event
	done       chan struct{}
	stopOnce   sync.Once
}

var _ watch.Interface = &watcher{}

// Watch starts a watch. ctx bounds it as Stop does.
func (m *Mux) Watch(ctx context.Context, opts WatchOptions) (watch.Interface, error) {
	m.mu.RLock()
	if !m.synced {
		m.mu.RUnlock()
		return nil, errNotSynced
	}
	w := &watcher{m: m, ctx: ctx, opts: opts, result: make(chan watch.Event), done: make(chan struct{})}
	state, rv := m.v.classify(opts.ResourceVersion)
	sendInitial := state == rvAny
	if opts.SendInitialEvents != nil {
		sendInitial = *opts.SendInitialEvents
		// Only a watch-list request (sendInitialEvents=true and
		// allowWatchBookmarks=true) gets the initial-events-end bookmark,
		// as from kube-apiserver's cacher: the watch handler has no
		// completion hook for any other, and a bookmark nobody asked for
		// is a junk row in kubectl's table.
		w.initialEnd = sendInitial && opts.AllowBookmarks
	}
	switch {
	case state == rvForeign:
		m.mu.RUnlock()
		return nil, apierrors.NewResourceExpired("resourceVersion " + opts.ResourceVersion + " was not issued by this server instance (another replica or an earlier run): list again")
	case state == rvFuture:
		m.mu.RUnlock()
		return nil, apierrors.NewTimeoutError("resourceVersion "+opts.ResourceVersion+" is newer than this server's", 1)
	case sendInitial:
		w.startRV = m.v.current()
		w.initial = m.snapshotLocked(opts, w.startRV)
	case state == rvOurs:
		events, ok := m.hist.sinceLocked(rv, opts.Namespace, w.wants)
		if !ok {
			m.mu.RUnlock()
			return nil, apierrors.NewResourceExpired("resourceVersion " + opts.ResourceVersion + " is too old: list again")
		}
		w.startRV = m.v.current()
		w.initial = events
	default: // "" or "0" with sendInitialEvents=false: from now on
		w.startRV = m.v.current()
	}
	size := m.opts.BufferSize
	if opts.Namespace == "" {
		size = max(10*size, 2*len(m.st.namespaces))
	}
	w.ch = make(chan *Event, size)
	m.wmu.Lock()
	m.addWatcherLocked(w)
	m.wmu.Unlock()
	m.mu.RUnlock()

	openWatchers.Inc()
	go w.run()
	return w, nil
}

// snapshotLocked returns the current items as ADDED events at rv.
func (m *Mux) snapshotLocked(opts WatchOptions, rv uint64) []*Event {
	namespaces := []string{opts.Namespace}
	if opts.Namespace == "" {
		namespaces = m.st.namespaceNames()
	}
	var out []*Event
	for _, ns := range namespaces {
		for _, r := range m.st.results(opts.Resource, ns, opts.Name) {
			out = append(out, &Event{RV: rv, Type: watch.Added, Resource: opts.Resource, Namespace: ns, Name: r.Item.Name, Result: r})
		}
	}
	return out
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
	defer w.Stop() // when ctx ends it; a no-op after Stop
	for _, e := range w.initial {
		if !w.emit(e) {
			return
		}
	}
	w.initial = nil
	if w.initialEnd {
		if !w.send(w.bookmark(w.startRV, true)) {
			return
		}
	}
	for {
		select {
		case e := <-w.ch:
			if !w.emit(e) {
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
		return w.send(w.bookmark(e.RV, false))
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

func (w *watcher) send(ev watch.Event) bool {
	select {
	case w.result <- ev:
		return true
	case <-w.done:
		return false
	case <-w.ctx.Done():
		return false
	}
}

func (w *watcher) bookmark(rv uint64, initialEnd bool) watch.Event {
	obj := w.m.objects.Empty(w.opts.Resource)
	if acc, err := meta.Accessor(obj); err == nil {
		acc.SetResourceVersion(format(rv))
		if initialEnd {
			acc.SetAnnotations(map[string]string{"k8s.io/initial-events-end": "true"})
		}
	}
	return watch.Event{Type: watch.Bookmark, Object: obj}
}

// object builds the view object of r for e, stamped with e's version.
func (m *Mux) object(e *Event, r merge.Result) (runtime.Object, error) {
	if b, ok := m.objects.(BatchObjects); ok && e.member {
		return b.BatchItem(e.Resource, e.Namespace, r, e.RV)
	}
	return m.objects.Item(e.Resource, e.Namespace, r, e.RV)
}

// addWatcherLocked indexes w by its namespace. Called with wmu held.
func (m *Mux) addWatcherLocked(w *watcher) {
	m.watchers[w] = struct{}{}
	if w.opts.Namespace == "" {
		m.allNamespaces[w] = struct{}{}
		return
	}
	if m.byNamespace[w.opts.Namespace] == nil {
		m.byNamespace[w.opts.Namespace] = map[*watcher]struct{}{}
	}
	m.byNamespace[w.opts.Namespace][w] = struct{}{}
}

// removeWatcherLocked drops w from the indexes. Called with wmu held.
func (m *Mux) removeWatcherLocked(w *watcher) {
	delete(m.watchers, w)
	delete(m.allNamespaces, w)
	if set := m.byNamespace[w.opts.Namespace]; set != nil {
		delete(set, w)
		if len(set) == 0 {
			delete(m.byNamespace, w.opts.Namespace)
		}
	}
}
