package sourcefeed

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// trackedLW is the informer's ListerWatcher: it lists and watches through
// the Tracker's, recording each list, event and bookmark before the
// reflector gets it.
type trackedLW struct{ t *Tracker }

var _ cache.ListerWatcherWithContext = &trackedLW{}

// List implements cache.Lister.
func (l *trackedLW) List(options metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), options)
}

// Watch implements cache.Watcher.
func (l *trackedLW) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), options)
}

// IsWatchListSemanticsUnSupported passes on the wrapped ListerWatcher's
// answer: the reflector uses watch-list when the client supports it.
func (l *trackedLW) IsWatchListSemanticsUnSupported() bool { return l.t.noWatchList }

// ListWithContext implements cache.ListerWithContext: a page adds to the
// list under way; the last page (no continue) completes it at the list's
// revision.
func (l *trackedLW) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	obj, err := retry(ctx, l.t.name, "list", l.t.retryFirst, l.t.retryMax, func() (runtime.Object, error) {
		return l.t.inner.ListWithContext(ctx, options)
	})
	if err != nil {
		return obj, err
	}
	lm, err := meta.ListAccessor(obj)
	if err != nil {
		return obj, nil
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return obj, nil
	}
	t := l.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if options.Continue == "" || t.listing == nil {
		t.listing = make(map[string]string, len(items))
	}
	for _, it := range items {
		if key, version, ok := keyOf(it); ok {
			t.listing[key] = version
		}
	}
	if lm.GetContinue() == "" {
		if rev, err := strconv.ParseUint(lm.GetResourceVersion(), 10, 64); err == nil {
			t.listedLocked(t.listing, rev)
		}
		t.listing = nil
	}
	return obj, nil
}

// WatchWithContext implements cache.WatcherWithContext: the events reach
// the reflector through a goroutine that records each one first.
func (l *trackedLW) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	options.TimeoutSeconds = l.t.timeoutSeconds(options)
	w, err := retry(ctx, l.t.name, "watch", l.t.retryFirst, l.t.retryMax, func() (watch.Interface, error) {
		return l.t.inner.WatchWithContext(ctx, options)
	})
	if err != nil {
		return w, err
	}
	tw := &trackedWatch{
		t: l.t, inner: w, out: make(chan watch.Event),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if options.SendInitialEvents != nil && *options.SendInitialEvents {
		tw.initial = map[string]string{}
	}
	go tw.run()
	return tw, nil
}

// trackedWatch hands the reflector the wrapped watch's events, each one
// recorded just before; one the reflector never takes (it stopped the
// watch) is taken back.
type trackedWatch struct {
	t     *Tracker
	inner watch.Interface
	out   chan watch.Event
	// initial accumulates a watch-list's initial events until the bookmark
	// that ends them; nil once they ended, or for a plain watch.
	initial  map[string]string
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// ResultChan implements watch.Interface.
func (w *trackedWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop implements watch.Interface. It returns once the goroutine is done,
// so that a relist after it is recorded after whatever it took back.
func (w *trackedWatch) Stop() {
	w.stopOnce.Do(func() {
		close(w.stop)
		w.inner.Stop()
	})
	<-w.done
}

func (w *trackedWatch) run() {
	defer close(w.done)
	defer close(w.out)
	in := w.inner.ResultChan()
	// A watch-list keeps the reflector's long timeout (its initial events
	// may take long); once they ended it is ended here after the progress
	// interval, and the reflector goes on with a plain watch from its
	// version, whose timeout is capped (timeoutSeconds).
	var end <-chan time.Time
	watchList := w.initial != nil
	for {
		var ev watch.Event
		var ok bool
		select {
		case ev, ok = <-in:
			if !ok {
				return
			}
		case <-end:
			w.inner.Stop()
			return
		case <-w.stop:
			return
		}
		undo := w.record(ev)
		if watchList && end == nil && w.initialEnded() {
			if every := w.t.progressEvery(); every > 0 {
				timer := time.NewTimer(every)
				defer timer.Stop()
				end = timer.C
			}
		}
		select {
		case w.out <- ev:
		case <-w.stop:
			if undo != nil {
				w.t.mu.Lock()
				undo()
				w.t.mu.Unlock()
			}
			return
		}
	}
}

// record records ev before the reflector gets it.
func (w *trackedWatch) record(ev watch.Event) (undo func()) {
	t := w.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if w.initial == nil {
		return t.observeLocked(ev)
	}
	key, version, ok := keyOf(ev.Object)
	if !ok {
		return nil
	}
	switch ev.Type {
	case watch.Added, watch.Modified:
		w.initial[key] = version
	case watch.Deleted:
		delete(w.initial, key)
	case watch.Bookmark:
		acc, err := meta.Accessor(ev.Object)
		if err != nil || acc.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
			return nil
		}
		rev, err := strconv.ParseUint(version, 10, 64)
		if err != nil {
			return nil
		}
		items := w.initial
		w.initial = nil
		undoList := t.listedLocked(items, rev)
		return func() {
			undoList()
			w.initial = items
		}
	}
	return nil
}

// timeoutSeconds is a watch's timeoutSeconds: the reflector's, capped at
// the progress interval plus up to half of it again (so the sources' watches
// don't end in step) for a watch that resumes from a version; a watch-list
// keeps the reflector's, since its initial events may take long.
func (t *Tracker) timeoutSeconds(options metav1.ListOptions) *int64 {
	every := t.progressEvery()
	if every <= 0 || (options.SendInitialEvents != nil && *options.SendInitialEvents) {
		return options.TimeoutSeconds
	}
	// At least 3 s: the watch cache's bookmark comes 2 s before the end.
	capped := max(int64(3), int64((every+rand.N(every/2+1))/time.Second))
	if options.TimeoutSeconds != nil && *options.TimeoutSeconds > 0 && *options.TimeoutSeconds < capped {
		return options.TimeoutSeconds
	}
	return &capped
}

// initialEnded reports whether a watch-list's initial events have ended.
func (w *trackedWatch) initialEnded() bool {
	w.t.mu.Lock()
	defer w.t.mu.Unlock()
	return w.initial == nil
}

// progressEvery is SetProgress's interval; 0 when unset.
func (t *Tracker) progressEvery() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.watchTimeout
}
