package sourcefeed

import (
	"context"
	"maps"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Sink receives an informer's deliveries regrouped into complete states.
// Its methods are called one at a time, in the informer's order.
type Sink interface {
	// Apply applies changes (one watch event, or every change a relist
	// made, at once) and records that the source's state is then complete
	// at etcd revision rev.
	Apply(changes []Change, rev uint64)
	// Progress records that the source's state, unchanged, is complete at
	// revision rev, and at every revision since its last change: a
	// bookmark (the watch delivered every write up to it).
	Progress(rev uint64)
	// Listed records that a list found the source's state as it was (a
	// relist that changed nothing, or a first list of no objects): it is
	// complete at revision rev, but the informer saw none of the writes
	// between its last revision and rev (an object created and deleted
	// while its watch was gone), so the states in between are unknown.
	Listed(rev uint64)
}

// Change is one handler delivery.
type Change struct {
	// Object is the object, or a cache.DeletedFinalStateUnknown holding
	// its last known state.
	Object any
	// Deleted: the object is gone.
	Deleted bool
}

// Tracker follows one informer's stream (see the package comment). Build
// the informer on ListerWatcher(), with a resync period of 0, and give the
// Tracker its Sink before the informer runs: Handler is the informer's
// handler that feeds the Sink.
//
// Concurrency: the reflector's goroutine (List, and one goroutine per watch
// that hands the reflector its events) records what the store will do; the
// informer's listener goroutine delivers. Both take mu, and the Sink is
// called with mu held, so its calls never interleave or go back in
// revision (lock order: mu, then whatever the Sink locks; the Sink never
// calls the Tracker).
type Tracker struct {
	name  string
	inner cache.ListerWatcherWithContext
	// noWatchList: the wrapped ListerWatcher says its client does not
	// support watch-list (client-go's IsWatchListSemanticsUnSupported).
	noWatchList bool
	// watchTimeout, when set, caps each watch's timeoutSeconds (SetProgress).
	watchTimeout time.Duration
	// retryFirst and retryMax bound the waits between calls sent again
	// while kube-apiserver is unavailable (retry.go).
	retryFirst, retryMax time.Duration

	mu   sync.Mutex
	sink Sink
	// shadow is the informer's store as the deltas handed to the reflector
	// so far leave it: key to resourceVersion.
	shadow map[string]string
	// forwarded counts the handler deliveries the deltas handed to the
	// reflector make; delivered, those the handler has had.
	forwarded, delivered uint64
	// marks are the lists and bookmarks not yet reached by the handler,
	// in the reflector's order.
	marks []mark
	// batch holds a relist's deliveries until its last one.
	batch []Change
	// listing accumulates a paginated list's pages.
	listing map[string]string
	// misaligned counts relists whose deliveries did not match the model.
	misaligned int
}

// mark is a point of the stream: after the first at deliveries, a bookmark
// (n == 0, list false) or a list whose n deliveries follow.
type mark struct {
	at, n uint64
	rev   uint64
	list  bool
	// same: the list holds exactly the store's objects, at the same
	// versions; its deliveries change nothing.
	same bool
}

// New returns a Tracker of the informer that lists and watches through lw.
func New(name string, lw cache.ListerWatcher) *Tracker {
	u, ok := lw.(interface{ IsWatchListSemanticsUnSupported() bool })
	return &Tracker{
		name: name, inner: cache.ToListerWatcherWithContext(lw), shadow: map[string]string{},
		noWatchList: ok && u.IsWatchListSemanticsUnSupported(),
		retryFirst:  retryFirst, retryMax: retryMax,
	}
}

// SetProgress caps the informer's watches (not its watch-lists) at about
// every: kube-apiserver's watch cache sends a bookmark two seconds before a
// watch's deadline, and the reflector then watches again from it without
// listing, so the informer gets a bookmark at least that often instead of
// once a minute. With Nudge at the same interval the bookmark carries etcd's
// revision of the last nudge, and a quiet source's part stays within about
// two intervals of etcd's current revision. Call it before the informer
// runs; 0 leaves the reflector's timeouts (5 to 10 minutes).
func (t *Tracker) SetProgress(every time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.watchTimeout = every
}

// SetSink sets the Sink; call it before the informer runs.
func (t *Tracker) SetSink(s Sink) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sink = s
}

// ListerWatcher is what the informer must list and watch through.
func (t *Tracker) ListerWatcher() cache.ListerWatcher { return &trackedLW{t: t} }

// Misaligned reports how many relists' deliveries did not match the
// Tracker's model of the store (0 unless client-go changed its order).
func (t *Tracker) Misaligned() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.misaligned
}

// Handler is the informer handler that feeds the Sink. Register it on the
// informer before the informer runs, and only once.
func (t *Tracker) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.deliver(Change{Object: obj}) },
		UpdateFunc: func(_, obj any) { t.deliver(Change{Object: obj}) },
		DeleteFunc: func(obj any) { t.deliver(Change{Object: obj, Deleted: true}) },
	}
}

// Nudge reads the source consistently (one item): kube-apiserver's watch
// cache then moves to etcd's current revision, and the bookmarks it sends
// the informer carry it, so a quiet source's revision keeps up with etcd's
// compaction window. It goes around the Tracker.
func (t *Tracker) Nudge(ctx context.Context) error {
	_, err := t.inner.ListWithContext(ctx, metav1.ListOptions{Limit: 1})
	return err
}

// deliver is the handler's delivery: one watch event at its revision, or a
// part of a relist's batch, applied at the list's revision with its last.
func (t *Tracker) deliver(c Change) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.delivered++
	if m, ok := t.batchMarkLocked(); ok {
		if _, inferred := c.Object.(cache.DeletedFinalStateUnknown); !inferred && revisionOf(c.Object) > m.rev {
			// Past the list's revision: the relist made fewer deliveries
			// than modelled. Apply what it made, and count the rest as had.
			t.misaligned++
			klog.ErrorS(nil, "Informer deliveries did not match the relist", "source", t.name, "expected", m.n, "had", uint64(len(t.batch)))
			t.endBatchLocked(m)
			t.delivered = m.at + m.n + 1
		} else {
			t.batch = append(t.batch, c)
			if t.delivered == m.at+m.n {
				t.endBatchLocked(m)
			}
			t.settleLocked()
			return
		}
	}
	if t.sink != nil {
		t.sink.Apply([]Change{c}, revisionOf(c.Object))
	} else {
		klog.ErrorS(nil, "Informer delivery before the feed's sink is set", "source", t.name)
	}
	t.settleLocked()
}

// batchMarkLocked returns the first mark when it is a relist whose
// deliveries are under way.
func (t *Tracker) batchMarkLocked() (mark, bool) {
	if len(t.marks) == 0 {
		return mark{}, false
	}
	m := t.marks[0]
	return m, m.list && m.n > 0 && t.delivered > m.at
}

// endBatchLocked applies a relist's batch at its revision.
func (t *Tracker) endBatchLocked(m mark) {
	t.marks = t.marks[1:]
	batch := t.batch
	t.batch = nil
	switch {
	case t.sink == nil:
	case m.same:
		// A relist that found every object as it was (after a watch
		// ended, or kube-apiserver restarted) is not a change: the state
		// is the same, complete at the list's revision (Listed: not at
		// the revisions whose writes the informer missed).
		t.sink.Listed(m.rev)
	default:
		t.sink.Apply(batch, m.rev)
	}
}

// settleLocked passes on the marks the handler has reached: bookmarks, and
// lists that changed nothing.
func (t *Tracker) settleLocked() {
	for len(t.marks) > 0 {
		m := t.marks[0]
		if m.at > t.delivered || m.n > 0 {
			return
		}
		t.marks = t.marks[1:]
		switch {
		case t.sink == nil:
		case m.list:
			t.sink.Listed(m.rev) // a list of nothing, onto an empty store
		default:
			t.sink.Progress(m.rev)
		}
	}
}

// listedLocked records a complete list (or a watch-list's initial events)
// at revision rev: the store is replaced by items, and the handler gets a
// deletion for each key it loses and an add or update for every item. An
// update of the same version is a resync, which client-go hands every
// listener that is "syncing"; a listener is syncing from its start until
// the informer's first resync check, which never comes when the informer's
// resync period is 0, as it must be for a Tracker.
func (t *Tracker) listedLocked(items map[string]string, rev uint64) (undo func()) {
	n := uint64(len(items))
	for k := range t.shadow {
		if _, ok := items[k]; !ok {
			n++
		}
	}
	old := t.shadow
	t.shadow = items
	t.marks = append(t.marks, mark{at: t.forwarded, n: n, rev: rev, list: true, same: maps.Equal(old, items)})
	t.forwarded += n
	t.settleLocked()
	return func() {
		if n == 0 {
			return // settled, and the store would be the same
		}
		t.shadow = old
		t.marks = t.marks[:len(t.marks)-1]
		t.forwarded -= n
	}
}

// observeLocked records what a watch event handed to the reflector makes
// the store do, and returns how to take it back if the reflector never
// takes it.
func (t *Tracker) observeLocked(ev watch.Event) (undo func()) {
	key, version, ok := keyOf(ev.Object)
	if !ok {
		return nil
	}
	switch ev.Type {
	case watch.Added, watch.Modified:
		old, had := t.shadow[key]
		t.shadow[key] = version
		t.forwarded++
		return func() {
			if had {
				t.shadow[key] = old
			} else {
				delete(t.shadow, key)
			}
			t.forwarded--
		}
	case watch.Deleted:
		old, had := t.shadow[key]
		delete(t.shadow, key)
		t.forwarded++
		return func() {
			if had {
				t.shadow[key] = old
			}
			t.forwarded--
		}
	case watch.Bookmark:
		if rev, err := strconv.ParseUint(version, 10, 64); err == nil {
			t.marks = append(t.marks, mark{at: t.forwarded, rev: rev})
			t.settleLocked()
		}
		// A bookmark's revision is the server's word whether or not the
		// reflector takes it: nothing to take back.
	}
	return nil
}

// revisionOf parses an object's resourceVersion; 0 when it has none.
func revisionOf(obj any) uint64 {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(acc.GetResourceVersion(), 10, 64)
	return n
}

// keyOf is the informer's key of obj and its resourceVersion.
func keyOf(obj runtime.Object) (key, version string, ok bool) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return "", "", false
	}
	key, err = cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return "", "", false
	}
	return key, acc.GetResourceVersion(), true
}

// RunProgress nudges every tracker each interval until ctx ends (a read
// bounded to 10 s each); 0 trackers or a non-positive interval: nothing.
func RunProgress(ctx context.Context, trackers []*Tracker, interval time.Duration) {
	if len(trackers) == 0 || interval <= 0 {
		return
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		for _, t := range trackers {
			nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if err := t.Nudge(nctx); err != nil && ctx.Err() == nil {
				klog.V(2).InfoS("Reading a source for progress failed", "resource", t.name, "err", err)
			}
			cancel()
		}
	}, interval)
}
