package watchmux

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// Options tune a Mux. Zero values take the defaults.
type Options struct {
	// HistorySize is how many view events are kept for resuming watches
	// (default 100,000).
	HistorySize int
	// HistoryBytes bounds the estimated bytes of the objects the history's
	// events pin (default 256 MiB): with large objects, HistorySize events
	// could pin gigabytes.
	HistoryBytes int64
	// BufferSize is a namespace watcher's buffer (default 100). An
	// all-namespaces watcher gets max(10 × BufferSize, 2 × namespaces).
	BufferSize int
	// SlowBudget is how long one fan-out waits, in all, for watchers whose
	// buffer is full before closing them (default 250ms).
	SlowBudget time.Duration
	// BookmarkInterval is how often watchers that asked for bookmarks get
	// one (default 30s).
	BookmarkInterval time.Duration
	// Clock is injected for tests (default the real clock).
	Clock clock.WithTicker
}

func (o *Options) defaults() {
	if o.HistorySize <= 0 {
		o.HistorySize = 100_000
	}
	if o.BufferSize <= 0 {
		o.BufferSize = 100
	}
	if o.SlowBudget <= 0 {
		o.SlowBudget = 250 * time.Millisecond
	}
	if o.BookmarkInterval <= 0 {
		o.BookmarkInterval = 30 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}

// Mux holds the mirror of the sources, computes view events and fans them out.
type Mux struct {
	opts    Options
	objects Objects

	// mu guards st, v, synced and hist.
	mu     sync.RWMutex
	st     *state
	v      versions
	synced bool
	hist   *history

	// nextTicket numbers the changes with events, in version order; mu.
	nextTicket uint64
	// fanMu guards the fan-out: serving is the ticket whose turn it is, and
	// fanTurn wakes the changes waiting for theirs. Fan-outs run one at a
	// time, in version order, without holding mu.
	fanMu   sync.Mutex
	fanTurn *sync.Cond
	serving uint64
	// dispatched is the version of the last event fanned out; fanMu.
	dispatched uint64

	// wmu guards watchers and their indexes by namespace ("" watchers are
	// in allNamespaces).
	wmu           sync.Mutex
	watchers      map[*watcher]struct{}
	allNamespaces map[*watcher]struct{}
	byNamespace   map[string]map[*watcher]struct{}

	// registrations of the informer handlers, for sync.
	regs []cache.ResourceEventHandlerRegistration

	// changed gets a value, without blocking, after every applied change
	// once synced: a coalescing signal for Changed.
	changed chan struct{}

	// hub names the cluster the global sources come from when they are read
	// from another cluster (AddGlobalSourceInformer); then the local
	// informers' objects in the global namespace are ignored.
	hub string
}

// New returns a mux for the resources of policy's namespaces, merged with
// the Replace strategy (see SetMergeOptions). objects turns events into view
// objects. More resources can be added while it runs (AddResource).
func New(policy merge.Policy, resources []string, objects Objects, opts Options) *Mux {
	opts.defaults()
	m := &Mux{
		opts:          opts,
		objects:       objects,
		st:            newState(policy, resources),
		v:             newVersions(),
		watchers:      map[*watcher]struct{}{},
		allNamespaces: map[*watcher]struct{}{},
		byNamespace:   map[string]map[*watcher]struct{}{},
		changed:       make(chan struct{}, 1),
	}
	m.fanTurn = sync.NewCond(&m.fanMu)
	m.hist = newHistory(opts.HistorySize, opts.HistoryBytes, m.v.current())
	return m
}

// AddNamespaceInformer feeds namespaces from informer.
func (m *Mux) AddNamespaceInformer(informer cache.SharedIndexInformer) error {
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { m.OnNamespace(obj, false) },
		UpdateFunc: func(old, obj any) {
			if !resynced(old, obj) {
				m.OnNamespace(obj, false)
			}
		},
		DeleteFunc: func(obj any) { m.OnNamespace(obj, true) },
	})
	if err != nil {
		return err
	}
	m.regs = append(m.regs, reg)
	return nil
}

// AddResource serves resource from now on, merged with o. It stays pending
// (its changes make no events) until MarkResourceSynced: feed it with
// WatchSources first.
func (m *Mux) AddResource(resource string, o merge.Options) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.st.sources[resource]; ok {
		return fmt.Errorf("watchmux: resource %q is already served", resource)
	}
	m.st.addResourceLocked(resource, o)
	return nil
}

// SetGlobalNamespace makes namespace the global namespace of resource,
// instead of the policy's. Call it before the resource's sources are fed.
// The namespace must not be a tenant (the configuration excludes it).
func (m *Mux) SetGlobalNamespace(resource, namespace string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.globals[resource] = namespace
}

// MarkResourceSynced ends the pending state of a resource added with
// AddResource: its informers have delivered their initial objects, and from
// now on its changes make view events.
func (m *Mux) MarkResourceSynced(resource string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.pending.Delete(resource)
	m.signalChanged()
}

// SetMergeOptions changes how resource merges: its strategy, and the
// overlayer built from its schema. Once the resource is served, every view
// item the change merges differently gets its event (a new schema may merge
// an overlay differently).
func (m *Mux) SetMergeOptions(resource string, o merge.Options) {
	start := m.opts.Clock.Now()
	m.mu.Lock()
	if _, ok := m.st.sources[resource]; !ok {
		m.mu.Unlock()
		return
	}
	if !m.synced || m.st.pending.Has(resource) {
		m.st.options[resource] = o
		m.mu.Unlock()
		return
	}
	names := m.st.namespaceNames()
	before := make([][]merge.Result, len(names))
	for i, ns := range names {
		before[i] = m.st.results(resource, ns, "")
	}
	m.st.options[resource] = o
	var events []*Event
	for i, ns := range names {
		events = append(events, diff(resource, ns, before[i], m.st.results(resource, ns, ""))...)
	}
	m.publishLocked(events, start)
}

// AddSourceInformer feeds the source objects of resource from informer. The
// mux's Run waits for it before serving.
func (m *Mux) AddSourceInformer(resource string, informer cache.SharedIndexInformer) error {
	reg, err := m.WatchSources(resource, "", informer)
	if err != nil {
		return err
	}
	m.regs = append(m.regs, reg)
	return nil
}

// WatchSources feeds the source objects of resource from informer, of the
// hub cluster named cluster ("" for the local one: see
// AddGlobalSourceInformer for hubs). It returns the handler's registration,
// whose HasSynced says when its initial objects are in.
func (m *Mux) WatchSources(resource, cluster string, informer cache.SharedIndexInformer) (cache.ResourceEventHandlerRegistration, error) {
	m.mu.Lock()
	_, ok := m.st.sources[resource]
	if ok && cluster != "" {
		m.hub = cluster
	}
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("watchmux: resource %q is not served", resource)
	}
	// Materialized copies are never sources: an object that gains the
	// label leaves the mirror as a deletion, one that loses it enters it as
	// an addition.
	return informer.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			acc, err := meta.Accessor(obj)
			return err != nil || !merge.IsMaterialized(acc.GetLabels())
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { m.onSource(resource, cluster, obj, false) },
			UpdateFunc: func(old, obj any) {
				if !resynced(old, obj) {
					m.onSource(resource, cluster, obj, false)
				}
			},
			DeleteFunc: func(obj any) { m.onSource(resource, cluster, obj, true) },
		},
	})
}

// AddGlobalSourceInformer feeds the global sources of resource from
// informer, a watch of the global namespace on the hub cluster named
// cluster. From then on the global namespace's objects of the local cluster
// are not sources: the global scope is the hub's.
func (m *Mux) AddGlobalSourceInformer(resource, cluster string, informer cache.SharedIndexInformer) error {
	reg, err := m.WatchSources(resource, cluster, informer)
	if err != nil {
		return err
	}
	m.regs = append(m.regs, reg)
	return nil
}

// resynced reports whether an update is an informer resync of an unchanged
// object: nothing to do.
func resynced(old, obj any) bool {
	a, errA := meta.Accessor(old)
	b, errB := meta.Accessor(obj)
	return errA == nil && errB == nil && a.GetResourceVersion() == b.GetResourceVersion()
}

// HasSynced reports whether every informer's initial objects are in the mirror.
func (m *Mux) HasSynced() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.synced
}

// Run marks the mux synced once every informer handler has seen its initial
// objects, sends bookmarks, and, when ctx is cancelled, closes every watcher.
func (m *Mux) Run(ctx context.Context) {
	syncs := make([]cache.InformerSynced, 0, len(m.regs))
	for _, r := range m.regs {
		syncs = append(syncs, r.HasSynced)
	}
	if cache.WaitForCacheSync(ctx.Done(), syncs...) {
		m.MarkSynced()
		m.mu.RLock()
		resources := slices.Clone(m.st.resources)
		m.mu.RUnlock()
		klog.InfoS("Sources synced: serving views", "resources", resources)
	}
	t := m.opts.Clock.NewTicker(m.opts.BookmarkInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			m.closeAll()
			return
		case <-t.C():
			m.bookmark()
		}
	}
}

// Changed signals, coalesced, that the mirror changed (or synced): a
// reader that wants to follow it re-reads what it needs after each signal.
// It has one reader: the admission webhook's ConditionSync.
func (m *Mux) Changed() <-chan struct{} { return m.changed }

func (m *Mux) signalChanged() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// MarkSynced starts serving: from now on every change makes view events.
// Run calls it once the informers have synced; callers that feed the mux
// with OnNamespace and OnSource themselves call it when they are done.
func (m *Mux) MarkSynced() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.synced {
		return
	}
	m.synced = true
	m.signalChanged()
	m.hist = newHistory(m.opts.HistorySize, m.opts.HistoryBytes, m.v.current())
	m.fanMu.Lock()
	m.dispatched = m.v.current()
	m.fanMu.Unlock()
}

// Read calls f with the state as of the returned resourceVersion, under the
// read lock: f must be quick and must not keep the Reader.
func (m *Mux) Read(f func(r Reader)) (rv string, err error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.synced {
		return "", errNotSynced
	}
	f(reader{m.st})
	return format(m.v.current()), nil
}

// Reader reads views from the mirror.
type Reader interface {
	// Results merges namespace's view of resource, or only item name when set.
	Results(resource, namespace, name string) []merge.Result
	// Namespaces lists every namespace, sorted.
	Namespaces() []string
	// Inherited is item name of namespace's view of resource as it would be
	// if namespace had no object of that name itself.
	Inherited(resource, namespace, name string) (merge.Result, bool)
}

type reader struct{ st *state }

func (r reader) Results(resource, namespace, name string) []merge.Result {
	return r.st.results(resource, namespace, name)
}
func (r reader) Namespaces() []string { return r.st.namespaceNames() }
func (r reader) Inherited(resource, namespace, name string) (merge.Result, bool) {
	res := r.st.resultsWith(resource, namespace, name, &override{namespace: namespace, name: name})
	if len(res) == 0 {
		return merge.Result{}, false
	}
	return res[0], true
}

// OnNamespace applies a namespace event: obj is a *corev1.Namespace or a
// cache.DeletedFinalStateUnknown holding one. The informer handler calls it.
func (m *Mux) OnNamespace(obj any, deleted bool) {
	start := m.opts.Clock.Now()
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		klog.ErrorS(nil, "Unexpected object in the namespace informer", "type", fmt.Sprintf("%T", obj))
		return
	}
	var next *merge.Namespace
	if !deleted {
		next = &merge.Namespace{Name: ns.Name, UID: ns.UID, Created: ns.CreationTimestamp.Time, Labels: ns.Labels, Annotations: ns.Annotations}
	}
	m.mu.Lock()
	if deleted || ns.DeletionTimestamp == nil {
		m.st.terminating.Delete(ns.Name)
	} else {
		m.st.terminating.Insert(ns.Name)
	}
	var events []*Event
	if m.synced && !m.hierarchyChange(ns.Name, next) {
		// Only what merging reads of a namespace matters: an update of
		// anything else (status, other labels) changes no view.
		m.st.setNamespaceLocked(ns.Name, next)
	} else if m.synced {
		// Every view of the namespace's subtree may change, in every
		// resource: down to the policy's MaxDepth levels, as no namespace
		// farther below inherits through it.
		affected := m.st.subtree(ns.Name)
		before := m.viewsLocked(affected)
		m.st.setNamespaceLocked(ns.Name, next)
		after := m.viewsLocked(affected)
		for i, name := range affected {
			for ri, resource := range m.st.resources {
				events = append(events, diff(resource, name, before[i][ri], after[i][ri])...)
			}
		}
	} else {
		m.st.setNamespaceLocked(ns.Name, next)
	}
	m.publishLocked(events, start)
}

// hierarchyChange reports whether replacing namespace name by next (nil:
// deleted) may change a view: it appears or goes, it is another namespace
// of the same name (its uid or creation time differ: an informer relist
// may replace one by the other without a deletion), or its parent label,
// its recorded parent uid, its inherit label or its exclusions change.
// Called with mu held.
func (m *Mux) hierarchyChange(name string, next *merge.Namespace) bool {
	old, ok := m.st.namespaces[name]
	if !ok || next == nil {
		return true
	}
	oldUID, oldHasUID := old.Annotations[merge.AnnotationParentUID]
	nextUID, nextHasUID := next.Annotations[merge.AnnotationParentUID]
	return old.UID != next.UID || !old.Created.Equal(next.Created) ||
		oldUID != nextUID || oldHasUID != nextHasUID ||
		old.Labels[merge.LabelParent] != next.Labels[merge.LabelParent] ||
		old.Labels[merge.LabelInherit] != next.Labels[merge.LabelInherit] ||
		old.Annotations[merge.AnnotationExclude] != next.Annotations[merge.AnnotationExclude]
}

// viewsLocked returns every resource's view of each namespace.
func (m *Mux) viewsLocked(namespaces []string) [][][]merge.Result {
	out := make([][][]merge.Result, len(namespaces))
	for i, ns := range namespaces {
		out[i] = make([][]merge.Result, len(m.st.resources))
		for ri, r := range m.st.resources {
			if m.st.pending.Has(r) {
				continue // no events before its sources are read
			}
			out[i][ri] = m.st.results(r, ns, "")
		}
	}
	return out
}

// OnSource applies an event of a source object of resource: obj is the
// object or a cache.DeletedFinalStateUnknown holding one. The informer
// handler calls it.
func (m *Mux) OnSource(resource string, obj any, deleted bool) {
	m.onSource(resource, "", obj, deleted)
}

// onSource applies a source event from cluster ("" for the local one).
func (m *Mux) onSource(resource, cluster string, obj any, deleted bool) {
	start := m.opts.Clock.Now()
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	o, ok := obj.(runtime.Object)
	if !ok {
		klog.ErrorS(nil, "Unexpected object in a source informer", "resource", resource, "type", fmt.Sprintf("%T", obj))
		return
	}
	acc, err := meta.Accessor(o)
	if err != nil {
		klog.ErrorS(err, "Source object without metadata", "resource", resource)
		return
	}
	namespace, name := acc.GetNamespace(), acc.GetName()
	var next *merge.Item
	if !deleted {
		ann := acc.GetAnnotations()
		next = &merge.Item{Namespace: namespace, Name: name, Locked: merge.IsLocked(ann), Overlay: merge.WantsOverlay(ann), Object: o, Cluster: cluster}
	}
	m.mu.Lock()
	if _, served := m.st.sources[resource]; !served {
		m.mu.Unlock()
		klog.ErrorS(nil, "Event of a resource that is not served", "resource", resource)
		return
	}
	if m.hub != "" && cluster == "" && namespace == m.st.policy.GlobalNamespace {
		m.mu.Unlock()
		return // the hub's global namespace is the global scope, not this one's
	}
	var events []*Event
	if m.synced && !m.st.pending.Has(resource) && namespace == m.st.globalFor(resource) {
		events = m.globalChangeLocked(resource, namespace, name, next)
	} else if m.synced && !m.st.pending.Has(resource) {
		// Only the item of this name can change, in the views of the
		// namespaces below the source.
		affected := m.st.affected(resource, namespace)
		before := make([][]merge.Result, len(affected))
		for i, ns := range affected {
			before[i] = m.st.results(resource, ns, name)
		}
		m.st.setItemLocked(resource, namespace, name, next)
		for i, ns := range affected {
			events = append(events, diff(resource, ns, before[i], m.st.results(resource, ns, name))...)
		}
	} else {
		m.st.setItemLocked(resource, namespace, name, next)
	}
	sourceObjects.WithLabelValues(resource).Set(float64(m.st.sourceCount(resource)))
	m.publishLocked(events, start)
}

// publishLocked stamps events with versions, keeps them in the history and
// fans them out. It is called with mu held and releases it.
func (m *Mux) publishLocked(events []*Event, start time.Time) {
	for _, e := range events {
		var rv uint64
		var ok bool
		if e.batch != nil {
			// One version per member, as for separate events.
			e.batch.base, ok = m.v.reserve(uint64(e.batch.members()))
			rv = e.batch.last()
		} else {
			rv, ok = m.v.next()
		}
		if !ok {
			// 2^40 events: start over as a new instance; every watcher
			// relists. Bookmarks carry the new instance's versions only,
			// and none reaches a watcher of the old one: it is closed
			// before the fan-out lock is released.
			m.v = newVersionsExcept(m.v.instance)
			m.hist = newHistory(m.opts.HistorySize, m.opts.HistoryBytes, m.v.current())
			m.fanMu.Lock()
			// Let the fan-outs already numbered finish first: no event of
			// the old instance may reach a watcher of the new one.
			for m.serving != m.nextTicket {
				m.fanTurn.Wait()
			}
			m.dispatched = m.v.current()
			m.closeAll()
			m.fanMu.Unlock()
			m.mu.Unlock()
			return
		}
		e.RV = rv
		m.hist.addLocked(e)
		if e.batch != nil {
			// The members' generations are not set one by one: every
			// lineage's generation holds the global namespace's, which
			// stands for them (LineageGeneration).
			m.st.generations[m.st.globalFor(e.Resource)] = rv
		} else if _, exists := m.st.namespaces[e.Namespace]; exists || m.st.isGlobal(e.Namespace) {
			m.st.generations[e.Namespace] = rv
		} else {
			delete(m.st.generations, e.Namespace)
		}
	}
	if m.synced {
		m.signalChanged()
	}
	if len(events) == 0 {
		m.mu.Unlock()
		return
	}
	// Fan-outs run one at a time in version order, but without the state
	// lock: the ticket, taken under it, is this change's turn. Reads and the
	// next changes go on while a fan-out waits for a slow watcher.
	ticket := m.nextTicket
	m.nextTicket++
	m.mu.Unlock()

	m.fanMu.Lock()
	defer m.fanMu.Unlock()
	for m.serving != ticket {
		m.fanTurn.Wait()
	}
	m.fanOutLocked(events)
	m.dispatched = events[len(events)-1].RV
	m.serving++
	m.fanTurn.Broadcast()
	fanOutLatency.Observe(m.opts.Clock.Since(start).Seconds())
}

var errNotSynced = fmt.Errorf("the sources have not been read yet")

// IsNotSynced reports whether err says the mux has not synced yet.
func IsNotSynced(err error) bool { return err == errNotSynced }
