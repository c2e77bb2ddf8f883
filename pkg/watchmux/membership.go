package watchmux

import (
	"fmt"
	"maps"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/sourcefeed"
)

// A member cluster's registration on its fleet's hub (a MemberCluster of
// fleet.implicit.dev, made by the hub's admin) decides which hub candidates
// exist in this cluster: one whose implicit.dev/canary-clusters does not
// select the registration's labels does not (merge.Candidate.InCluster).
// The registration is a source like any other: its changes are applied at
// their hub revisions, under their own key in the versions' vector, and a
// past state is rebuilt with the registration listed at the vector's
// revision. A relabel therefore names a new state, and makes the events of
// every view a candidate enters or leaves.

// membership is a cluster's registration: registered is false when the
// server is no member of a fleet, or its hub holds no MemberCluster of its
// name.
type membership struct {
	registered bool
	labels     labels.Set
}

// membershipOf is the registration the listed objects hold (at most one:
// the MemberCluster of the member's name).
func membershipOf(objs []runtime.Object) membership {
	for _, o := range objs {
		if acc, err := meta.Accessor(o); err == nil {
			return membership{registered: true, labels: labels.Set(maps.Clone(acc.GetLabels()))}
		}
	}
	return membership{}
}

// selects reports whether a candidate's cluster selector selects the
// registration.
func (a membership) selects(clusters labels.Selector) bool {
	return a.registered && clusters.Matches(a.labels)
}

func (a membership) equal(b membership) bool {
	return a.registered == b.registered && maps.Equal(a.labels, b.labels)
}

// membershipKeyOf is the registration's source key: the member's name on
// its hub.
func membershipKeyOf(member, hub string) string {
	return sourceKey("memberclusters/"+member, hub)
}

// AddMembership feeds the cluster's registration on the hub from informer,
// which lists and watches the MemberCluster named member only (a field
// selector on metadata.name), through tracker when set (tracker's
// ListerWatcher must be the one informer lists and watches with: relists
// are then applied at their revisions, as the sources' are); list lists it
// as of a hub revision. Run waits for it, as for the sources. Call it
// before Run, once.
func (m *Mux) AddMembership(member, hub string, informer cache.SharedIndexInformer, tracker *sourcefeed.Tracker, list ListFunc) error {
	key := membershipKeyOf(member, hub)
	m.mu.Lock()
	if m.membershipKey != "" {
		m.mu.Unlock()
		return fmt.Errorf("watchmux: membership already fed as %s", m.membershipKey)
	}
	m.membershipKey, m.member = key, member
	m.pos.addLocked(key)
	if list != nil {
		m.pos.lists[key] = list
	}
	m.mu.Unlock()
	var handler cache.ResourceEventHandler = cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { m.onMembership(obj, false) },
		UpdateFunc: func(old, obj any) {
			if !resynced(old, obj) {
				m.onMembership(obj, false)
			}
		},
		DeleteFunc: func(obj any) { m.onMembership(obj, true) },
	}
	if tracker != nil {
		tracker.SetSink(&membershipSink{m: m})
		handler = tracker.Handler()
	}
	reg, err := informer.AddEventHandler(handler)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.regs = append(m.regs, reg)
	m.mu.Unlock()
	return nil
}

// membershipSink feeds the registration from its Tracker.
type membershipSink struct{ m *Mux }

// Apply implements sourcefeed.Sink: the registration is one object, so the
// last change (of a relist's, in order) is its state at rev.
func (s *membershipSink) Apply(changes []sourcefeed.Change, rev uint64) {
	if len(changes) == 0 {
		s.m.progress(s.m.membershipKey, rev)
		return
	}
	last := changes[len(changes)-1]
	obj, deleted := last.Object, last.Deleted
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	next, ok := registrationOf(obj, deleted)
	if !ok {
		return
	}
	s.m.applyMembership(next, rev, true)
}

// Progress implements sourcefeed.Sink.
func (s *membershipSink) Progress(rev uint64) { s.m.progress(s.m.membershipKey, rev) }

// Listed implements sourcefeed.Sink.
func (s *membershipSink) Listed(rev uint64) { s.m.listed(s.m.membershipKey, rev) }

// onMembership applies an informer's event of the registration, at the
// object's revision.
func (m *Mux) onMembership(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	next, ok := registrationOf(obj, deleted)
	if !ok {
		return
	}
	m.applyMembership(next, revisionOr(0, obj), false)
}

// registrationOf is the registration an event of obj leaves.
func registrationOf(obj any, deleted bool) (membership, bool) {
	o, ok := obj.(runtime.Object)
	if !ok {
		klog.ErrorS(nil, "Unexpected object in the membership informer", "type", fmt.Sprintf("%T", obj))
		return membership{}, false
	}
	if deleted {
		return membership{}, true
	}
	return membershipOf([]runtime.Object{o}), true
}

// applyMembership applies the registration next, complete at hub revision
// rev: the candidates whose canary-clusters select the cluster differently
// enter or leave the views. A change a Tracker delivers (tracked) at or
// before the revision a catch-up found the registration equal at is
// dropped, as a source's is (passedLocked).
func (m *Mux) applyMembership(next membership, rev uint64, tracked bool) {
	start := m.opts.Clock.Now()
	m.mu.Lock()
	if tracked && m.pos.passedLocked(m.membershipKey, rev) {
		m.mu.Unlock()
		return
	}
	k, prev := m.pos.applyLocked(m.membershipKey, rev)
	s := m.st
	var events []*Event
	if !s.membership.equal(next) {
		// The hub candidates with implicit.dev/canary-clusters follow.
		klog.InfoS("Fleet registration changed", "member", m.member, "registered", next.registered, "labels", next.labels.String())
		events = m.moveCandidatesLocked(next)
	}
	ticket, fan := m.stampLocked(events, k, prev)
	m.mu.Unlock()
	if fan {
		m.fanOutInTurn(ticket, events, start)
	}
}

// moveCandidatesLocked sets the registration next, and the candidates whose
// cluster selector selects it otherwise than the current one again, and
// returns the view events: the views of every name they stand in for,
// merged before and after the whole change (one event per view item, as a
// relist's). Called with mu held for writing.
func (m *Mux) moveCandidatesLocked(next membership) []*Event {
	s := m.st
	type moved struct {
		resource, namespace, name string
		item                      merge.Item
	}
	var todo []moved
	for _, r := range s.resources {
		for ns, items := range s.sources[r] {
			for name, it := range items {
				if c := it.Candidate; c != nil && c.Clusters != nil && next.selects(c.Clusters) != s.membership.selects(c.Clusters) {
					todo = append(todo, moved{r, ns, name, it})
				}
			}
		}
	}
	type viewItem struct{ resource, namespace, name string }
	var items []viewItem
	seen := map[viewItem]bool{}
	for _, mv := range todo {
		if !m.synced || s.pending.Has(mv.resource) {
			continue // no events before the resource is served
		}
		for _, n := range []string{mv.name, mv.item.Candidate.For} {
			if n == "" {
				continue
			}
			for _, ns := range s.affected(mv.resource, mv.namespace) {
				if v := (viewItem{mv.resource, ns, n}); !seen[v] {
					seen[v] = true
					items = append(items, v)
				}
			}
		}
	}
	before := make([][]merge.Result, len(items))
	for i, v := range items {
		before[i] = s.results(v.resource, v.namespace, v.name)
	}
	s.membership = next
	for _, mv := range todo {
		mv.item.Candidate = mv.item.Candidate.InAnyCluster()
		s.setItemLocked(mv.resource, mv.namespace, mv.name, &mv.item) // marked for next
	}
	var events []*Event
	for i, v := range items {
		after := s.results(v.resource, v.namespace, v.name)
		s.trackName(v.resource, v.namespace, v.name, after)
		events = append(events, diff(v.resource, v.namespace, before[i], after)...)
	}
	for _, r := range s.resources {
		candidateNamespaces.WithLabelValues(r).Set(float64(len(s.candidateViews[r])))
	}
	return events
}
