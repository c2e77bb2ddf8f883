package materialize

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// FieldManager is the field manager of every write of a copy.
const FieldManager = "implicit-apiserver"

// Views is what the materializer reads of the views: *watchmux.Mux.
type Views interface {
	Read(f func(watchmux.Reader)) (string, error)
	Watch(ctx context.Context, opts watchmux.WatchOptions) (watch.Interface, error)
	// Serving reports whether resource's views are complete (synced).
	Serving(resource string) bool
}

// Options tune a Materializer. Zero values take the defaults.
type Options struct {
	// Workers reconcile namespaces concurrently (default DefaultWorkers);
	// writes are rate-limited by the client given to New, shared by all.
	// Each waits for its write's answer: the workers, not the rate limit,
	// bound the writes per second once that limit is raised.
	Workers int
	// Resync is how often every namespace is compared again without a
	// change (default 10m): a safety net, as changes and drift are followed.
	Resync time.Duration
	// BehindAfter is how long a namespace may wait before the periodic log
	// line names it as behind (default 10s); LogInterval how often that
	// line is written (default 30s).
	BehindAfter time.Duration
	LogInterval time.Duration
	// Clock is injected for tests (default the real clock).
	Clock clock.WithTicker
	// Protobuf, when set, reads and writes the copies of the built-in
	// kinds in protobuf (NewProtobuf); nil: every kind through the dynamic
	// client given to New, in JSON.
	Protobuf *Protobuf
}

// DefaultWorkers is the default of Options.Workers: as many writes in
// flight as a 32-worker client copier keeps (issue 45).
const DefaultWorkers = 32

func (o *Options) defaults() {
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.Resync <= 0 {
		o.Resync = 10 * time.Minute
	}
	if o.BehindAfter <= 0 {
		o.BehindAfter = 10 * time.Second
	}
	if o.LogInterval <= 0 {
		o.LogInterval = 30 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}

// Materializer keeps the copies of the materialized kinds equal to the
// inherited items of every tenant namespace's views.
//
// Concurrency: Run starts, for its lifetime, one informer of the copies per
// kind, one goroutine per kind that follows its views' changes and queues
// the namespaces they name, Options.Workers workers that reconcile queued
// namespaces (the workqueue never hands one namespace to two workers), and
// one that logs the namespaces behind. Everything stops when Run's context
// is cancelled, and Run returns once it has. mu guards the bookkeeping the
// workers share (dirty, seen, reported, wrote, uids, inflight, requeue).
type Materializer struct {
	views    Views
	dyn      dynamic.Interface
	kinds    []kinds.Kind
	recorder record.EventRecorder
	opts     Options

	// runMu is held by Run for its lifetime: a new leader term's Run
	// starts once the previous one has stopped.
	runMu sync.Mutex

	mu sync.Mutex
	// dirty holds the namespaces queued since a change, with when they
	// were first queued: the lag starts there.
	dirty map[string]time.Time
	// seen holds, for each copy the informers have shown, the source
	// version it carried: a copy that goes missing while its item's source
	// is unchanged was deleted behind the guards.
	seen map[copyKey]string
	// reported holds the conflicts already reported, with the uid of the
	// tenant object, so each is reported once.
	reported map[copyKey]string
	// wrote holds the resourceVersion of each copy as the materializer's
	// own last write left it: the copies' informer shows that write back,
	// and a copy at that version needs no drift check (queueing its
	// namespace again would only count it as pending once more).
	wrote map[copyKey]string
	// uids holds the uid of each copy the informers have shown or the
	// materializer wrote: an object of that uid without the label is a
	// copy a write made its writer's own, no tenant object in the way.
	uids map[copyKey]types.UID
	// inflight holds the copies being written (begin, end), with the
	// last version of each the copies' informer showed meanwhile that
	// was not the previous write's: the write's own result usually
	// arrives before the write returns, and is no drift.
	inflight map[copyKey]string
	// requeue queues a namespace in the current Run (nil outside one).
	requeue func(namespace string)
}

type copyKey struct{ resource, namespace, name string }

// New returns a materializer of the kinds served, reading views and writing with dyn
// (whose rate limit bounds the writes). recorder, when set, records
// conflicts as Events on the namespaces.
func New(views Views, dyn dynamic.Interface, served []kinds.Kind, recorder record.EventRecorder, opts Options) *Materializer {
	opts.defaults()
	return &Materializer{
		views: views, dyn: dyn, kinds: slices.Clone(served), recorder: recorder, opts: opts,
		dirty: map[string]time.Time{}, seen: map[copyKey]string{}, reported: map[copyKey]string{}, wrote: map[copyKey]string{},
		uids: map[copyKey]types.UID{}, inflight: map[copyKey]string{},
	}
}

// run is one Run's queue and informers: a new leader term starts afresh.
type run struct {
	m     *Materializer
	queue workqueue.TypedRateLimitingInterface[string]
	// copiesMu guards copies: each kind's informer of its copies, once
	// synced.
	copiesMu sync.RWMutex
	copies   map[string]cache.SharedIndexInformer
}

// Run materializes until ctx is cancelled; it returns once everything it
// started has stopped. Call it while leading (see RunWithLeaderElection).
func (m *Materializer) Run(ctx context.Context) {
	m.runMu.Lock()
	defer m.runMu.Unlock()
	if ctx.Err() != nil {
		return
	}
	r := &run{
		m: m,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "materialize", Clock: m.opts.Clock}),
		copies: map[string]cache.SharedIndexInformer{},
	}
	m.mu.Lock()
	m.requeue = r.enqueue
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.requeue = nil
		m.mu.Unlock()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer r.queue.ShutDown()
	for _, k := range m.kinds {
		wg.Go(func() { r.follow(ctx, k) })
	}
	for range m.opts.Workers {
		wg.Go(func() {
			for r.processNext(ctx) {
			}
		})
	}
	wg.Go(func() { r.logBehind(ctx) })
	wg.Go(func() {
		t := m.opts.Clock.NewTicker(m.opts.Resync)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				r.enqueueAll()
			}
		}
	})
	<-ctx.Done()
}

// follow queues the namespaces whose view of k changes, from a watch of
// every namespace's view. Whenever a watch starts (the first, or again
// after one closed), every namespace is queued: what happened in between
// is found by comparing, not replayed.
func (r *run) follow(ctx context.Context, k kinds.Kind) {
	// Fail-static: nothing is compared with an incomplete view. A kind
	// served from a configuration may appear only later.
	if err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
		return r.m.views.Serving(k.Resource()), nil
	}); err != nil {
		return
	}
	copiesOnly := func(o *metav1.ListOptions) {
		o.LabelSelector = labels.SelectorFromSet(labels.Set{v1alpha1.LabelMaterialized: "true"}).String()
	}
	inf := r.m.opts.Protobuf.informer(k, copiesOnly)
	if inf == nil {
		inf = dynamicinformer.NewFilteredDynamicSharedInformerFactory(r.m.dyn, 0, metav1.NamespaceAll, copiesOnly).
			ForResource(k.Source).Informer()
	}
	if _, err := inf.AddEventHandler(r.copyHandler(k)); err != nil {
		klog.ErrorS(err, "Watching materialized copies", "resource", k.Source.String())
		return
	}
	var informing sync.WaitGroup
	defer informing.Wait()
	informing.Go(func() { inf.RunWithContext(ctx) })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return
	}
	r.copiesMu.Lock()
	r.copies[k.Resource()] = inf
	r.copiesMu.Unlock()
	klog.InfoS("Materializing views", "resource", k.Resource(), "source", k.Source.String())
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if !r.m.views.Serving(k.Resource()) {
			return
		}
		w, err := r.m.views.Watch(ctx, watchmux.WatchOptions{
			Resource: k.Resource(), SendInitialEvents: ptr.To(false),
			GroupResource: schema.GroupResource{Group: viewGroup, Resource: k.Resource()},
		})
		if err != nil {
			klog.ErrorS(err, "Watching views to materialize", "resource", k.Resource())
			return
		}
		defer w.Stop()
		r.enqueueAll()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					klog.V(2).InfoS("Materializer's view watch closed: comparing every namespace again", "resource", k.Resource())
					return
				}
				if ev.Type == watch.Error || ev.Type == watch.Bookmark {
					continue
				}
				if ns := namespaceOf(ev.Object); ns != "" {
					r.enqueue(ns)
				}
			}
		}
	}, time.Second)
}

// viewGroup is the views' API group (pkg/servedgroup.GroupName).
const viewGroup = "implicit.dev"

func namespaceOf(obj runtime.Object) string {
	if c, ok := obj.(runtime.CacheableObject); ok {
		obj = c.GetObject()
	}
	if a, ok := obj.(metav1.Object); ok {
		return a.GetNamespace()
	}
	return ""
}

// copyHandler queues the namespace of every copy that changes, and records
// the source version each copy carries (seen).
func (r *run) copyHandler(k kinds.Kind) cache.ResourceEventHandler {
	note := func(obj any) {
		u, err := meta.Accessor(obj)
		if err != nil || !v1alpha1.IsMaterialized(u.GetLabels()) {
			return
		}
		key := copyKey{k.Resource(), u.GetNamespace(), u.GetName()}
		r.m.mu.Lock()
		r.m.seen[key] = sourceVersion(u)
		r.m.uids[key] = u.GetUID()
		rv := u.GetResourceVersion()
		echo := rv != "" && r.m.wrote[key] == rv
		if _, writing := r.m.inflight[key]; writing && !echo {
			// Decided when the write returns (end).
			r.m.inflight[key] = rv
			echo = true
		}
		r.m.mu.Unlock()
		if !echo {
			r.enqueue(u.GetNamespace())
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    note,
		UpdateFunc: func(_, obj any) { note(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if u, err := meta.Accessor(obj); err == nil {
				r.m.mu.Lock()
				delete(r.m.wrote, copyKey{k.Resource(), u.GetNamespace(), u.GetName()})
				r.m.mu.Unlock()
				r.enqueue(u.GetNamespace())
			}
		},
	}
}

// sourceVersion is what a copy or a desired copy says of its source.
func sourceVersion(u metav1.Object) string {
	a := u.GetAnnotations()
	return a[v1alpha1.AnnotationSourceUID] + "/" + a[v1alpha1.AnnotationSourceResourceVersion]
}

func (r *run) enqueue(namespace string) {
	r.m.mu.Lock()
	if _, ok := r.m.dirty[namespace]; !ok {
		r.m.dirty[namespace] = r.m.opts.Clock.Now()
	}
	pending.Set(float64(len(r.m.dirty)))
	r.m.mu.Unlock()
	r.queue.Add(namespace)
}

func (r *run) enqueueAll() {
	var names []string
	if _, err := r.m.views.Read(func(rd watchmux.Reader) { names = rd.Namespaces() }); err != nil {
		return
	}
	for _, ns := range names {
		r.enqueue(ns)
	}
}

func (r *run) processNext(ctx context.Context) bool {
	ns, shutdown := r.queue.Get()
	if shutdown {
		return false
	}
	defer r.queue.Done(ns)
	r.m.mu.Lock()
	since, wasDirty := r.m.dirty[ns]
	delete(r.m.dirty, ns)
	r.m.mu.Unlock()
	n, err := r.m.reconcile(ctx, ns, r.copyLister)
	if err != nil {
		if ctx.Err() == nil {
			klog.ErrorS(err, "Materializing a namespace's views", "namespace", ns)
		}
		r.m.mu.Lock()
		if _, ok := r.m.dirty[ns]; !ok && wasDirty {
			r.m.dirty[ns] = since // still behind since then
		}
		pending.Set(float64(len(r.m.dirty)))
		r.m.mu.Unlock()
		r.queue.AddRateLimited(ns)
		return true
	}
	r.queue.Forget(ns)
	r.m.mu.Lock()
	pending.Set(float64(len(r.m.dirty)))
	r.m.mu.Unlock()
	if n > 0 && wasDirty {
		lag.Observe(r.m.opts.Clock.Since(since).Seconds())
	}
	return true
}

// errNotReady: a kind's copies have not been read yet.
var errNotReady = errors.New("the copies have not been read yet")

// copyLister returns the copies of k in namespace, from the informer.
func (r *run) copyLister(k kinds.Kind, namespace string) ([]metav1.Object, error) {
	r.copiesMu.RLock()
	inf := r.copies[k.Resource()]
	r.copiesMu.RUnlock()
	if inf == nil {
		return nil, errNotReady
	}
	objs, err := inf.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil, err
	}
	out := make([]metav1.Object, 0, len(objs))
	for _, o := range objs {
		// The informer lists copies only; an object that just lost the
		// label may still be in it: it is no copy.
		if a, err := meta.Accessor(o); err == nil && v1alpha1.IsMaterialized(a.GetLabels()) {
			out = append(out, a)
		}
	}
	return out, nil
}

// logBehind names, every LogInterval, the namespaces waiting longer than
// BehindAfter.
func (r *run) logBehind(ctx context.Context) {
	t := r.m.opts.Clock.NewTicker(r.m.opts.LogInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		now := r.m.opts.Clock.Now()
		type behind struct {
			ns  string
			age time.Duration
		}
		var late []behind
		r.m.mu.Lock()
		for ns, since := range r.m.dirty {
			if d := now.Sub(since); d > r.m.opts.BehindAfter {
				late = append(late, behind{ns, d})
			}
		}
		total := len(r.m.dirty)
		r.m.mu.Unlock()
		if len(late) == 0 {
			continue
		}
		sort.Slice(late, func(i, j int) bool { return late[i].age > late[j].age })
		names := make([]string, 0, 20)
		for _, b := range late[:min(20, len(late))] {
			names = append(names, fmt.Sprintf("%s (%s)", b.ns, b.age.Round(time.Second)))
		}
		klog.InfoS("Materialized copies are behind their views", "behind", len(late), "pending", total, "oldest", names)
	}
}
