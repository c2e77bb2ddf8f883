package watchmux

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/sourcefeed"
)

// The feed: the informers' handlers, and the calls that configure what is
// served, change the mirror under mu held for writing. A change computes
// its view events from the state before and after it, then publishes them
// (publish.go).

// AddNamespaceInformer feeds namespaces from informer. Run waits for it
// before serving.
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
	m.mu.Lock()
	m.regs = append(m.regs, reg)
	m.mu.Unlock()
	return nil
}

// Source is an informer of the source objects of one resource.
type Source struct {
	// Informer delivers the source objects.
	Informer cache.SharedIndexInformer
	// Cluster names the hub cluster whose global namespace Informer
	// watches; "" for the local cluster. From the first hub source on, the
	// global namespace's objects of the local cluster are not sources: the
	// global scope is the hub's.
	Cluster string
	// List lists the source objects as of an etcd revision
	// (resourceVersionMatch=Exact), for serving versions issued by another
	// replica or an earlier run; nil: those answer 410 Gone.
	List ListFunc
	// Stream, when set, is the Tracker Informer lists and watches through:
	// the mux then takes complete states from it (stream.go). Without it,
	// a source's revision is that of the last object delivered, which is
	// right only for an informer that never relists.
	Stream *sourcefeed.Tracker
}

// SetNamespaceList sets the lister of the namespaces as of an etcd
// revision, as Source.List is a source's.
func (m *Mux) SetNamespaceList(list ListFunc) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pos.lists[namespacesKey] = list
}

// SetSourceList sets the lister of resource's sources from cluster ("" for
// the local one) as of an etcd revision, for a feed without AddSource.
func (m *Mux) SetSourceList(resource, cluster string, list ListFunc) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pos.addLocked(sourceKey(resource, cluster))
	m.pos.lists[sourceKey(resource, cluster)] = list
}

// AddSource feeds the source objects of resource from s. It returns the
// handler's registration, whose HasSynced says when its initial objects
// are in. Run waits for the sources of the resources New was given; a
// resource added with AddResource stays pending until its caller, having
// waited for the registrations itself, calls MarkResourceSynced.
func (m *Mux) AddSource(resource string, s Source) (cache.ResourceEventHandlerRegistration, error) {
	m.mu.Lock()
	_, ok := m.st.sources[resource]
	if ok && s.Cluster != "" {
		m.hub = s.Cluster
	}
	if ok {
		m.pos.addLocked(sourceKey(resource, s.Cluster))
		if s.List != nil {
			m.pos.lists[sourceKey(resource, s.Cluster)] = s.List
		}
	}
	pending := m.st.pending.Has(resource)
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("watchmux: resource %q is not served", resource)
	}
	cluster := s.Cluster
	var reg cache.ResourceEventHandlerRegistration
	var err error
	if s.Stream != nil {
		s.Stream.SetSink(&sourceSink{m: m, resource: resource, cluster: cluster})
		reg, err = s.Informer.AddEventHandler(s.Stream.Handler())
	} else {
		reg, err = m.addSourceHandler(s.Informer, resource, cluster)
	}
	if err != nil {
		return nil, err
	}
	if !pending {
		m.mu.Lock()
		m.regs = append(m.regs, reg)
		m.mu.Unlock()
	}
	return reg, nil
}

// addSourceHandler feeds the mux from informer's objects as delivered.
func (m *Mux) addSourceHandler(informer cache.SharedIndexInformer, resource, cluster string) (cache.ResourceEventHandlerRegistration, error) {
	// Materialized copies are never sources: an object that gains the
	// label leaves the mirror as a deletion, one that loses it enters it as
	// an addition.
	return informer.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			acc, err := meta.Accessor(obj)
			return err != nil || !v1alpha1.IsMaterialized(acc.GetLabels())
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

// sourceItem is the merge item of the source object o, namespace/name.
// A candidate is one whatever its annotations' errors: a malformed one
// reaches no namespace, and is never an ordinary source.
func sourceItem(namespace, name string, acc metav1.Object, o runtime.Object, cluster string) *merge.Item {
	ann := acc.GetAnnotations()
	c, _ := merge.ParseCandidate(name, ann)
	return &merge.Item{
		Namespace: namespace, Name: name, Locked: merge.IsLocked(ann), Exceptions: merge.ExceptionRulesOf(ann), Overlay: merge.WantsOverlay(ann),
		Object: o, Cluster: cluster, UID: acc.GetUID(), Candidate: c,
	}
}

// resynced reports whether an update is an informer resync of an unchanged
// object: nothing to do.
func resynced(old, obj any) bool {
	a, errA := meta.Accessor(old)
	b, errB := meta.Accessor(obj)
	return errA == nil && errB == nil && a.GetResourceVersion() == b.GetResourceVersion()
}

// AddResource serves resource from now on, merged with o. It stays pending
// (its changes make no events) until MarkResourceSynced: feed it with
// AddSource first.
func (m *Mux) AddResource(resource string, o merge.Options) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.st.sources[resource]; ok {
		return fmt.Errorf("watchmux: resource %q is already served", resource)
	}
	m.st.addResourceLocked(resource, o)
	m.pos.addLocked(resource)
	m.pos.invalidateLocked()
	return nil
}

// SetGlobalNamespace makes namespace the global namespace of resource,
// instead of the policy's. Call it before the resource's sources are fed.
// The namespace must not be a tenant (the configuration excludes it).
func (m *Mux) SetGlobalNamespace(resource, namespace string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.globals[resource] = namespace
	m.pos.invalidateLocked()
}

// MarkResourceSynced ends the pending state of a resource added with
// AddResource: its informers have delivered their initial objects, and from
// now on its changes make view events.
func (m *Mux) MarkResourceSynced(resource string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st.pending.Delete(resource)
	if m.synced {
		m.trackCandidatesLocked(resource)
	}
	m.signalChanged()
}

// trackCandidatesLocked records which view items of resource are built
// from candidates, from scratch: when its views start to be served. Only
// the stable names of its candidates, in the namespaces they reach, are
// merged: nothing without candidates. Called with mu held for writing.
func (m *Mux) trackCandidatesLocked(resource string) {
	s := m.st
	s.candidateViews[resource] = map[string]sets.Set[string]{}
	for key := range s.candidates[resource] {
		for _, ns := range s.affected(resource, key.namespace) {
			s.trackName(resource, ns, key.name, s.results(resource, ns, key.name))
		}
	}
	candidateNamespaces.WithLabelValues(resource).Set(float64(len(s.candidateViews[resource])))
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
	for _, r := range m.st.resources {
		if !m.st.pending.Has(r) {
			m.trackCandidatesLocked(r)
		}
	}
	m.signalChanged()
	m.hist = newHistory(m.opts.HistorySize, m.opts.HistoryBytes, m.v.current())
	m.fanMu.Lock()
	m.dispatched = m.v.current()
	m.dispatchedVer = newChangeVersion(m.st.fingerprint(m.pos), m.pos.vector(), -1, 0, true)
	m.fanMu.Unlock()
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
	m.pos.invalidateLocked()
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
		after := m.st.results(resource, ns, "")
		m.st.trackView(resource, ns, after)
		events = append(events, diff(resource, ns, before[i], after)...)
	}
	candidateNamespaces.WithLabelValues(resource).Set(float64(len(m.st.candidateViews[resource])))
	ticket, fan := m.stampLocked(events, -1, 0)
	m.mu.Unlock()
	if fan {
		m.fanOutInTurn(ticket, events, start)
	}
}

// OnNamespace applies a namespace event: obj is a *corev1.Namespace or a
// cache.DeletedFinalStateUnknown holding one. The informer handler calls it.
func (m *Mux) OnNamespace(obj any, deleted bool) {
	m.applyNamespace(obj, deleted, 0)
}

// applyNamespace applies a namespace event after which the namespaces'
// state is complete at revision rev; 0: at the object's resourceVersion.
func (m *Mux) applyNamespace(obj any, deleted bool, rev uint64) {
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
		next = merge.NamespaceOf(ns)
	}
	m.mu.Lock()
	if m.pos.passedLocked(namespacesKey, rev) {
		m.mu.Unlock()
		return
	}
	k, prev := m.pos.applyLocked(namespacesKey, revisionOr(rev, ns))
	replacing := m.replacingLocked(ns.Name, next)
	if deleted || ns.DeletionTimestamp == nil {
		m.st.terminating.Delete(ns.Name)
	} else {
		m.st.terminating.Insert(ns.Name)
	}
	var events []*Event
	hierarchy := m.synced && m.hierarchyChangeLocked(ns.Name, next)
	if m.synced && (hierarchy || m.stageChangeLocked(ns.Name, next)) {
		// Every view of the namespace's subtree may change, in every
		// resource: down to the policy's MaxDepth levels, as no namespace
		// farther below inherits through it. A change of its stage alone
		// changes its own views only: a canary selector matches the
		// viewing namespace's stage, never an ancestor's.
		affected := []string{ns.Name}
		if hierarchy {
			affected = m.st.subtree(ns.Name)
		}
		before := m.viewsLocked(affected)
		m.st.setNamespaceLocked(ns.Name, next)
		events = m.viewEventsLocked(affected, before)
	} else if m.synced {
		// Only what merging reads of a namespace matters: an update of
		// anything else (status, other labels) changes no view.
		m.st.setNamespaceLocked(ns.Name, next)
	} else {
		m.st.setNamespaceLocked(ns.Name, next)
	}
	ticket, fan := m.stampLocked(events, k, prev)
	if replacing {
		m.noteReplacedLocked(ns.Name)
	}
	m.mu.Unlock()
	if fan {
		m.fanOutInTurn(ticket, events, start)
	}
}

// hierarchyChangeLocked reports whether replacing namespace name by next
// (nil: deleted) may change a view: it appears or goes, it is another
// namespace of the same name (its uid or creation time differ: an informer
// relist may replace one by the other without a deletion), or its parent
// label, its recorded parent uid, its inherit label or its exclusions
// change. Called with mu held.
func (m *Mux) hierarchyChangeLocked(name string, next *merge.Namespace) bool {
	old, ok := m.st.namespaces[name]
	if !ok || next == nil {
		return true
	}
	oldUID, oldHasUID := old.Annotations[v1alpha1.AnnotationParentUID]
	nextUID, nextHasUID := next.Annotations[v1alpha1.AnnotationParentUID]
	return old.UID != next.UID || !old.Created.Equal(next.Created) ||
		oldUID != nextUID || oldHasUID != nextHasUID ||
		old.Labels[v1alpha1.LabelParent] != next.Labels[v1alpha1.LabelParent] ||
		old.Labels[v1alpha1.LabelInherit] != next.Labels[v1alpha1.LabelInherit] ||
		merge.ExclusionsChanged(old.Annotations, next.Annotations)
}

// stageChangeLocked reports whether replacing namespace name by next
// changes its implicit.dev/stage label, while some candidate exists: its
// views may then show other versions. Without candidates, a stage changes
// no view. Called with mu held.
func (m *Mux) stageChangeLocked(name string, next *merge.Namespace) bool {
	old, ok := m.st.namespaces[name]
	if !ok || next == nil || !m.st.anyCandidates() {
		return false
	}
	oldStage, oldHas := old.Labels[v1alpha1.LabelStage]
	nextStage, nextHas := next.Labels[v1alpha1.LabelStage]
	return oldStage != nextStage || oldHas != nextHas
}

// viewEventsLocked merges every resource's view of each namespace of names
// again, records the candidates they show, and returns their events against
// before (viewsLocked of names, before the change). Called with mu held for
// writing.
func (m *Mux) viewEventsLocked(names []string, before [][][]merge.Result) []*Event {
	after := m.viewsLocked(names)
	var events []*Event
	for i, name := range names {
		for ri, resource := range m.st.resources {
			if m.st.pending.Has(resource) {
				continue
			}
			m.st.trackView(resource, name, after[i][ri])
			events = append(events, diff(resource, name, before[i][ri], after[i][ri])...)
		}
	}
	for _, resource := range m.st.resources {
		candidateNamespaces.WithLabelValues(resource).Set(float64(len(m.st.candidateViews[resource])))
	}
	return events
}

// viewsLocked returns every resource's view of each namespace. Called with
// mu held.
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
	m.applySource(resource, cluster, obj, deleted, 0)
}

// applySource applies a source event after which the source's state is
// complete at revision rev; 0: at the object's resourceVersion.
func (m *Mux) applySource(resource, cluster string, obj any, deleted bool, rev uint64) {
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
		next = sourceItem(namespace, name, acc, o, cluster)
	}
	m.mu.Lock()
	if _, served := m.st.sources[resource]; !served {
		m.mu.Unlock()
		klog.ErrorS(nil, "Event of a resource that is not served", "resource", resource)
		return
	}
	if m.pos.passedLocked(sourceKey(resource, cluster), rev) {
		m.mu.Unlock()
		return
	}
	k, prev := m.pos.applyLocked(sourceKey(resource, cluster), revisionOr(rev, o))
	if m.hub != "" && cluster == "" && namespace == m.st.policy.GlobalNamespace {
		m.mu.Unlock()
		return // the hub's global namespace is the global scope, not this one's
	}
	// The view items this change may change: its own name, and the stable
	// name of the candidate it is, was, or both (a candidate stands in for
	// its stable source where its selector matches).
	names := []string{name}
	addFor := func(c *merge.Candidate) {
		if c != nil && c.For != "" && !slices.Contains(names, c.For) {
			names = append(names, c.For)
		}
	}
	old, had := m.st.sources[resource][namespace][name]
	if had {
		addFor(old.Candidate)
	}
	if next != nil {
		addFor(next.Candidate)
	}
	staged := (had && old.Candidate != nil) || (next != nil && next.Candidate != nil) || m.st.hasCandidatesFor(resource, namespace, name)
	var events []*Event
	if m.synced && !m.st.pending.Has(resource) && namespace == m.st.globalFor(resource) && !staged {
		events = m.globalChangeLocked(resource, namespace, name, next)
	} else if m.synced && !m.st.pending.Has(resource) {
		// Only the items of these names can change, in the views of the
		// namespaces below the source. A global name with a candidate is
		// merged namespace by namespace: tenants see it by their stages,
		// not alike.
		affected := m.st.affected(resource, namespace)
		before := make([][]merge.Result, len(affected)*len(names))
		for i, ns := range affected {
			for j, n := range names {
				before[i*len(names)+j] = m.st.results(resource, ns, n)
			}
		}
		m.st.setItemLocked(resource, namespace, name, next)
		for i, ns := range affected {
			for j, n := range names {
				after := m.st.results(resource, ns, n)
				m.st.trackName(resource, ns, n, after)
				events = append(events, diff(resource, ns, before[i*len(names)+j], after)...)
			}
		}
		candidateNamespaces.WithLabelValues(resource).Set(float64(len(m.st.candidateViews[resource])))
	} else {
		m.st.setItemLocked(resource, namespace, name, next)
	}
	sourceObjects.WithLabelValues(resource).Set(float64(m.st.sourceCount(resource)))
	candidates.WithLabelValues(resource).Set(float64(m.st.candidateCounts[resource]))
	ticket, fan := m.stampLocked(events, k, prev)
	m.mu.Unlock()
	if fan {
		m.fanOutInTurn(ticket, events, start)
	}
}
