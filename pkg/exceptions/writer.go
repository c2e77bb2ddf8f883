package exceptions

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// Defaults of Config.
const (
	// DefaultWarningWindow is how long before its end an exception is
	// warned of (--exception-warning-window).
	DefaultWarningWindow = 7 * 24 * time.Hour
	// DefaultResync is the longest the writer sleeps without looking at
	// every namespace again.
	DefaultResync = 30 * time.Second
	// FieldManager is the field manager of the marks' writes.
	FieldManager = "implicit-apiserver-exceptions"
	// maxConflicts is how many conflicts one attempt re-reads through
	// before it backs off.
	maxConflicts = 5
	// workers write the marks of that many namespaces at once (the queue
	// never hands one namespace to two): a burst of ends is written at
	// the client's rate, not one webhook round trip at a time.
	workers = 8
)

// Event reasons.
const (
	ReasonExpiresSoon = "ExceptionExpiresSoon"
	ReasonExpired     = "ExceptionExpired"
)

// Config configures a Writer.
type Config struct {
	// Client patches namespaces (implicit.dev/exceptions-expired only).
	Client kubernetes.Interface
	// Namespaces is the server's shared namespace informer.
	Namespaces coreinformers.NamespaceInformer
	// Clock decides when ends have passed (default the real clock).
	Clock clock.Clock
	// WarningWindow is how long before its end an exception is warned of
	// (default DefaultWarningWindow).
	WarningWindow time.Duration
	// Resync bounds the sleep between two looks at every namespace
	// (default DefaultResync).
	Resync time.Duration
	// StateOf, when set, names an exception's state for the gauge
	// (Requested needs the views); nil: Expired or Active.
	StateOf func(ns *corev1.Namespace, e merge.Exception) string
}

// Writer marks exceptions expired at their ends.
//
// Two goroutines: the watcher looks at every namespace when one of their
// exception annotations changes, when a timer set to the earliest coming
// end (or warning) fires, and at least every Resync; it sets the gauges,
// records the ExpiresSoon Events and queues the namespaces with an end
// passed and no mark. The worker writes the marks, one namespace at a
// time, with the namespace's resourceVersion: on a Conflict it re-reads
// the namespace and recomputes (another replica may have written the
// mark); after maxConflicts, or on any other error, the namespace is
// retried with the queue's exponential backoff, and the watcher does not
// queue it again meanwhile. Cancelling Run's context stops both.
type Writer struct {
	cfg        Config
	namespaces corelisters.NamespaceLister
	synced     cache.InformerSynced
	queue      workqueue.TypedRateLimitingInterface[string]
	// kick wakes the watcher; buffered, one pending wake is enough.
	kick     chan struct{}
	recorder record.EventRecorder
	// warned holds the exception versions already warned of; states the
	// states StateOf last said. Watcher only.
	warned map[string]bool
	states map[string]cachedState
	// written holds, by namespace, what this replica's last write returned
	// and the versions it superseded, until the informer has caught up:
	// the watcher may queue a namespace again from the informer's copy
	// before our own write reaches it. Workers only, under writtenMu.
	writtenMu sync.Mutex
	written   map[string]writtenNamespace
}

type writtenNamespace struct {
	ns         *corev1.Namespace
	superseded map[string]bool
}

// New returns a writer fed by cfg.Namespaces.
func New(cfg Config) (*Writer, error) {
	if cfg.Client == nil || cfg.Namespaces == nil {
		return nil, fmt.Errorf("exceptions: a client and a namespace informer are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.WarningWindow <= 0 {
		cfg.WarningWindow = DefaultWarningWindow
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	w := &Writer{
		cfg:        cfg,
		namespaces: cfg.Namespaces.Lister(),
		synced:     cfg.Namespaces.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 30*time.Second),
			// The backoff of failed writes runs on the real clock: Clock
			// decides only when ends pass (and a fake one's tests count the
			// watcher's timer as its one waiter).
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "implicit_exceptions"}),
		kick:    make(chan struct{}, 1),
		warned:  map[string]bool{},
		states:  map[string]cachedState{},
		written: map[string]writtenNamespace{},
	}
	_, err := cfg.Namespaces.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if ns, ok := obj.(*corev1.Namespace); ok && merge.DeclaresExclusions(ns.Annotations) {
				w.wake()
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Namespace)
			n, ok2 := cur.(*corev1.Namespace)
			if !ok1 || !ok2 || merge.ExclusionsChanged(o.Annotations, n.Annotations) {
				w.wake()
			}
		},
		DeleteFunc: func(any) { w.wake() },
	})
	return w, err
}

func (w *Writer) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Run writes marks until ctx is cancelled, recording Events with recorder
// when it is not nil.
func (w *Writer) Run(ctx context.Context, recorder record.EventRecorder) {
	defer utilruntime.HandleCrash()
	w.recorder = recorder
	defer w.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), w.synced) {
		return
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for w.processNext(ctx) {
			}
		})
	}
	w.watchEnds(ctx)
	w.queue.ShutDown()
	wg.Wait()
}

// watchEnds looks at every namespace, then sleeps until the earliest
// coming end or warning, the next change or Resync, whichever is first.
func (w *Writer) watchEnds(ctx context.Context) {
	for {
		sleep := w.cfg.Resync
		if next := w.scan(); !next.IsZero() {
			if d := next.Sub(w.cfg.Clock.Now()); d < sleep {
				sleep = max(d, 0)
			}
		}
		t := w.cfg.Clock.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-w.kick:
			t.Stop()
		}
	}
}

// scan looks at every namespace at the clock's now: it queues those with
// a mark to write, warns of the exceptions entering the warning window,
// sets the gauges and returns the earliest coming end or warning (zero if
// none).
func (w *Writer) scan() time.Time {
	now := w.cfg.Clock.Now()
	all, err := w.namespaces.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(err)
		return time.Time{}
	}
	var next time.Time
	sooner := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	// First the marks to write, so that the worker starts at once; then
	// the warnings and the gauges (StateOf may read the views).
	declaring := all[:0:0]
	for _, ns := range all {
		if !merge.DeclaresExclusions(ns.Annotations) {
			continue
		}
		declaring = append(declaring, ns)
		// A namespace backing off after a failed write is the queue's to
		// retry; queueing it again here would retry it at once.
		if markingOf(ns, now).changes() && w.queue.NumRequeues(ns.Name) == 0 {
			w.queue.Add(ns.Name)
		}
	}
	states := map[string]int{v1alpha1.ExceptionActive: 0, v1alpha1.ExceptionRequested: 0, v1alpha1.ExceptionExpired: 0}
	soon := 0
	inWindow, declared := map[string]bool{}, map[string]bool{}
	for _, ns := range declaring {
		for _, e := range merge.ExceptionsOf(merge.NamespaceOf(ns)) {
			states[w.stateOf(ns, e, now, declared)]++
			if e.Expired || e.ExpiresAt == nil {
				continue
			}
			end := e.Ends()
			warnAt := end.Add(-w.cfg.WarningWindow)
			if warnAt.After(now) {
				sooner(warnAt)
				continue
			}
			soon++
			if !end.After(now) {
				continue // the worker marks it
			}
			sooner(end)
			key := ns.Name + "/" + e.Name + "/" + e.Digest
			inWindow[key] = true
			if !w.warned[key] {
				w.warned[key] = true
				w.event(ns, corev1.EventTypeWarning, ReasonExpiresSoon, fmt.Sprintf("exception %s (excluding %s) ends at %s, in %s",
					e.Name, strings.Join(e.Exclude, ", "), end.UTC().Format(time.RFC3339), end.Sub(now).Round(time.Minute)))
			}
		}
	}
	for key := range w.states {
		if !declared[key] {
			delete(w.states, key)
		}
	}
	for key := range w.warned {
		if !inWindow[key] {
			delete(w.warned, key)
		}
	}
	for state, n := range states {
		exceptionsGauge.WithLabelValues(state).Set(float64(n))
	}
	expiringSoon.Set(float64(soon))
	return next
}

// stateOf is e's state for the gauge. StateOf reads the views, so its
// answer is kept for Resync: a burst of namespace changes (a thousand
// marks written in one second) costs one look per exception, not one per
// change. seen collects the keys still declared, for pruning.
func (w *Writer) stateOf(ns *corev1.Namespace, e merge.Exception, now time.Time, seen map[string]bool) string {
	switch {
	case e.Expired:
		return v1alpha1.ExceptionExpired
	case w.cfg.StateOf == nil:
		return v1alpha1.ExceptionActive
	}
	key := ns.Name + "/" + e.Name + "/" + e.Digest
	if e.Approval != nil {
		key += "/" + e.Approval.By + "/" + strings.Join(e.Approval.Sources, ",")
	}
	seen[key] = true
	if c, ok := w.states[key]; ok && now.Sub(c.at) < w.cfg.Resync {
		return c.state
	}
	st := w.cfg.StateOf(ns, e)
	w.states[key] = cachedState{state: st, at: now}
	return st
}

type cachedState struct {
	state string
	at    time.Time
}

func (w *Writer) processNext(ctx context.Context) bool {
	name, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(name)
	if err := w.mark(ctx, name); err != nil {
		utilruntime.HandleError(fmt.Errorf("marking the ended exceptions of namespace %s: %w", name, err))
		w.queue.AddRateLimited(name)
		return true
	}
	w.queue.Forget(name)
	return true
}

// mark writes the namespace's marks as of now, from the informer's copy
// first and, after a conflict, from a fresh read.
func (w *Writer) mark(ctx context.Context, name string) error {
	ns, err := w.namespaces.Get(name)
	if apierrors.IsNotFound(err) {
		w.forget(name)
		return nil
	} else if err != nil {
		return err
	}
	w.writtenMu.Lock()
	if last, ok := w.written[name]; ok && last.superseded[ns.ResourceVersion] {
		ns = last.ns // the informer has not seen our write yet
	} else {
		delete(w.written, name)
	}
	w.writtenMu.Unlock()
	read := map[string]bool{}
	for conflicts := 0; ; {
		read[ns.ResourceVersion] = true
		m := markingOf(ns, w.cfg.Clock.Now())
		if !m.changes() {
			if conflicts > 0 {
				// Another replica wrote it: what was read afresh stands
				// for the versions read before it, which the informer may
				// still hand out (the watcher, or another worker, would
				// write from them again).
				expiryWrites.WithLabelValues(resultDone).Inc()
				delete(read, ns.ResourceVersion)
				w.writtenMu.Lock()
				w.written[name] = writtenNamespace{ns: ns, superseded: read}
				w.writtenMu.Unlock()
			}
			return nil
		}
		body, err := m.patch(ns.ResourceVersion)
		if err != nil {
			return err
		}
		got, err := w.cfg.Client.CoreV1().Namespaces().Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager})
		switch {
		case err == nil:
			expiryWrites.WithLabelValues(resultWritten).Inc()
			w.writtenMu.Lock()
			w.written[name] = writtenNamespace{ns: got, superseded: read}
			w.writtenMu.Unlock()
			for _, e := range m.expired {
				klog.InfoS("Exception expired", "namespace", klog.KRef("", name), "exception", e.Name, "digest", e.Digest, "ends", e.Ends())
				w.event(ns, corev1.EventTypeNormal, ReasonExpired, fmt.Sprintf("exception %s (excluding %s) ended at %s: marked expired, in effect nowhere",
					e.Name, strings.Join(e.Exclude, ", "), e.Ends().UTC().Format(time.RFC3339)))
			}
			return nil
		case apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			expiryWrites.WithLabelValues(resultError).Inc()
			return err
		}
		expiryWrites.WithLabelValues(resultConflict).Inc()
		if conflicts++; conflicts >= maxConflicts {
			return err
		}
		ns, err = w.cfg.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
	}
}

func (w *Writer) event(ns *corev1.Namespace, eventType, reason, msg string) {
	if w.recorder == nil {
		return
	}
	// In the namespace itself, where its tenants look (kubectl events -n NS).
	w.recorder.Event(&corev1.ObjectReference{
		APIVersion: "v1", Kind: "Namespace", Name: ns.Name, UID: ns.UID,
		ResourceVersion: ns.ResourceVersion, Namespace: ns.Name,
	}, eventType, reason, msg)
}

// forget drops what the workers remember of namespace name's last write.
func (w *Writer) forget(name string) {
	w.writtenMu.Lock()
	defer w.writtenMu.Unlock()
	delete(w.written, name)
}
