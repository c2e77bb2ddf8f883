package watchmux

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/sourcefeed"
)

// Tracked sources: an informer fed through a sourcefeed.Tracker hands the
// mux complete states only. A watch event is applied at its own revision,
// a relist as one change at the list's revision (its events stamped with
// positions inside that change, as a re-parent's are), and a bookmark moves
// the source's revision with nothing changed. So a source's component of a
// version is always a revision at which etcd held exactly the mirror's
// state of that source: never the highest revision delivered so far, which
// after a relist's key-ordered delivery, or an inferred deletion, names a
// state the client doesn't hold (issue 38, cases 2 and 3).

var (
	_ sourcefeed.Sink = &sourceSink{}
	_ sourcefeed.Sink = &namespaceSink{}
)

// sourceSink feeds one source of resource (from cluster, "" for the local
// one) from its Tracker.
type sourceSink struct {
	m                 *Mux
	resource, cluster string
}

// Apply implements sourcefeed.Sink.
func (s *sourceSink) Apply(changes []sourcefeed.Change, rev uint64) {
	if len(changes) == 1 {
		c := changes[0]
		obj, deleted := sourceChange(c)
		s.m.applySource(s.resource, s.cluster, obj, deleted, rev)
		return
	}
	s.m.applySourceBatch(s.resource, s.cluster, changes, rev)
}

// Progress implements sourcefeed.Sink.
func (s *sourceSink) Progress(rev uint64) {
	s.m.progress(sourceKey(s.resource, s.cluster), rev)
}

// Listed implements sourcefeed.Sink.
func (s *sourceSink) Listed(rev uint64) {
	s.m.listed(sourceKey(s.resource, s.cluster), rev)
}

// sourceChange is a change as the mirror takes it: a materialized copy is
// never a source, so an object that carries the label is gone from it.
func sourceChange(c sourcefeed.Change) (obj any, deleted bool) {
	obj, deleted = c.Object, c.Deleted
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	if acc, err := meta.Accessor(obj); err == nil && v1alpha1.IsMaterialized(acc.GetLabels()) {
		deleted = true
	}
	return obj, deleted
}

// namespaceSink feeds the namespaces from their Tracker.
type namespaceSink struct{ m *Mux }

// Apply implements sourcefeed.Sink.
func (s *namespaceSink) Apply(changes []sourcefeed.Change, rev uint64) {
	if len(changes) == 1 {
		s.m.applyNamespace(changes[0].Object, changes[0].Deleted, rev)
		return
	}
	s.m.applyNamespaceBatch(changes, rev)
}

// Progress implements sourcefeed.Sink.
func (s *namespaceSink) Progress(rev uint64) { s.m.progress(namespacesKey, rev) }

// Listed implements sourcefeed.Sink.
func (s *namespaceSink) Listed(rev uint64) { s.m.listed(namespacesKey, rev) }

// AddNamespaceStream feeds namespaces from informer through t: t's
// ListerWatcher must be the one informer lists and watches with.
func (m *Mux) AddNamespaceStream(informer cache.SharedIndexInformer, t *sourcefeed.Tracker) error {
	t.SetSink(&namespaceSink{m: m})
	reg, err := informer.AddEventHandler(t.Handler())
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.regs = append(m.regs, reg)
	m.mu.Unlock()
	return nil
}

// progress records that source key's state is complete at rev, unchanged.
func (m *Mux) progress(key string, rev uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pos.progressLocked(key, rev)
}

// listed records that a list of source key at rev found its state as the
// mirror holds it (positions.listedLocked).
func (m *Mux) listed(key string, rev uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pos.listedLocked(key, rev)
}

// applySourceBatch applies a relist of one source as one change at rev:
// the views of the namespaces below every object it changes are merged
// before and after the whole of it.
func (m *Mux) applySourceBatch(resource, cluster string, changes []sourcefeed.Change, rev uint64) {
	start := m.opts.Clock.Now()
	m.mu.Lock()
	if _, served := m.st.sources[resource]; !served {
		m.mu.Unlock()
		klog.ErrorS(nil, "Relist of a resource that is not served", "resource", resource)
		return
	}
	if m.pos.passedLocked(sourceKey(resource, cluster), rev) {
		m.mu.Unlock()
		return
	}
	k, prev := m.pos.applyLocked(sourceKey(resource, cluster), rev)
	type change struct {
		namespace, name string
		next            *merge.Item
	}
	var todo []change
	for _, c := range changes {
		obj, deleted := sourceChange(c)
		o, ok := obj.(runtime.Object)
		if !ok {
			continue
		}
		acc, err := meta.Accessor(o)
		if err != nil {
			continue
		}
		namespace, name := acc.GetNamespace(), acc.GetName()
		if m.hub != "" && cluster == "" && namespace == m.st.policy.GlobalNamespace {
			continue // the hub's global namespace is the global scope
		}
		var next *merge.Item
		if !deleted {
			next = sourceItem(namespace, name, acc, o, cluster)
		}
		todo = append(todo, change{namespace, name, next})
	}
	var events []*Event
	if m.synced && !m.st.pending.Has(resource) {
		affected := sets.New[string]()
		for _, c := range todo {
			affected.Insert(m.st.affected(resource, c.namespace)...)
		}
		names := sets.List(affected)
		before := make([][]merge.Result, len(names))
		for i, ns := range names {
			before[i] = m.st.results(resource, ns, "")
		}
		for _, c := range todo {
			m.st.setItemLocked(resource, c.namespace, c.name, c.next)
		}
		for i, ns := range names {
			after := m.st.results(resource, ns, "")
			m.st.trackView(resource, ns, after)
			events = append(events, diff(resource, ns, before[i], after)...)
		}
		candidateNamespaces.WithLabelValues(resource).Set(float64(len(m.st.candidateViews[resource])))
	} else {
		for _, c := range todo {
			m.st.setItemLocked(resource, c.namespace, c.name, c.next)
		}
	}
	sourceObjects.WithLabelValues(resource).Set(float64(m.st.sourceCount(resource)))
	candidates.WithLabelValues(resource).Set(float64(m.st.candidateCounts[resource]))
	ticket, fan := m.stampLocked(events, k, prev)
	m.mu.Unlock()
	if fan {
		m.fanOutInTurn(ticket, events, start)
	}
}

// applyNamespaceBatch applies a relist of the namespaces as one change at
// rev: every view of the subtrees of the namespaces it changes is merged
// before and after the whole of it.
func (m *Mux) applyNamespaceBatch(changes []sourcefeed.Change, rev uint64) {
	start := m.opts.Clock.Now()
	type change struct {
		ns   *corev1.Namespace
		next *merge.Namespace
	}
	var todo []change
	for _, c := range changes {
		obj, deleted := c.Object, c.Deleted
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj, deleted = d.Obj, true
		}
		ns, ok := obj.(*corev1.Namespace)
		if !ok {
			klog.ErrorS(nil, "Unexpected object in the namespace informer", "type", fmt.Sprintf("%T", obj))
			continue
		}
		var next *merge.Namespace
		if !deleted {
			next = merge.NamespaceOf(ns)
		}
		todo = append(todo, change{ns, next})
	}
	m.mu.Lock()
	if m.pos.passedLocked(namespacesKey, rev) {
		m.mu.Unlock()
		return
	}
	k, prev := m.pos.applyLocked(namespacesKey, rev)
	var replaced []string
	for _, c := range todo {
		if m.replacingLocked(c.ns.Name, c.next) {
			replaced = append(replaced, c.ns.Name)
		}
	}
	set := func() {
		for _, c := range todo {
			if c.next == nil || c.ns.DeletionTimestamp == nil {
				m.st.terminating.Delete(c.ns.Name)
			} else {
				m.st.terminating.Insert(c.ns.Name)
			}
			m.st.setNamespaceLocked(c.ns.Name, c.next)
		}
	}
	var events []*Event
	if !m.synced {
		set()
	} else {
		// Only a change of what merging reads of a namespace changes views
		// (a relist hands over every namespace, most of them unchanged),
		// and only in its subtree: a namespace that comes under another
		// is itself changed, and the children index holds the children of
		// a parent that does not exist yet.
		affected := sets.New[string]()
		for _, c := range todo {
			if m.hierarchyChangeLocked(c.ns.Name, c.next) || m.stageChangeLocked(c.ns.Name, c.next) {
				affected.Insert(m.st.subtree(c.ns.Name)...)
			}
		}
		names := sets.List(affected)
		before := m.viewsLocked(names)
		set()
		events = m.viewEventsLocked(names, before)
	}
	ticket, fan := m.stampLocked(events, k, prev)
	for _, name := range replaced {
		m.noteReplacedLocked(name)
	}
	m.mu.Unlock()
	if fan {
		m.fanOutInTurn(ticket, events, start)
	}
}
