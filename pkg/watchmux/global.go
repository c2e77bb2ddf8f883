package watchmux

import (
	"sort"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// globalChangeLocked records next (nil: deleted) as the global source name
// of resource in namespace global, and returns the view events it makes.
//
// A global source reaches every tenant, and most tenants see it alike: a
// tenant whose lineage (itself and its ancestors) neither holds an item of
// that name nor excludes it merges it with nothing, so its view item is the
// same as every other such tenant's, but for the namespace. Those tenants
// are found as the complement of the exceptions, which are found from
// indexes (the holders of the name, the namespaces with exclusions, and
// their subtrees) in time proportional to the exceptions. One member is
// merged, before and after, for all of them, and their events travel as one
// batch. The exceptions, and the global namespace's own view, are merged
// one by one, as any change is. Called with mu held for writing.
func (m *Mux) globalChangeLocked(resource, global, name string, next *merge.Item) []*Event {
	s := m.st
	tenants := s.tenantList()
	skip := s.exceptions(resource, name)
	var one []string // merged one by one
	if _, ok := s.namespaces[global]; ok {
		one = append(one, global)
	}
	for _, n := range sets.List(skip) {
		if ns, ok := s.namespaces[n]; ok && n != global && s.policy.IsTenant(ns) {
			one = append(one, n)
		}
	}
	representative := ""
	for _, n := range tenants.names {
		if !skip.Has(n) {
			representative = n
			break
		}
	}
	if representative != "" {
		one = append(one, representative)
	}

	before := make([][]merge.Result, len(one))
	for i, ns := range one {
		before[i] = s.results(resource, ns, name)
	}
	s.setItemLocked(resource, global, name, next)
	var events []*Event
	var b *batch
	for i, ns := range one {
		after := s.results(resource, ns, name)
		changes := diff(resource, ns, before[i], after)
		if ns != representative {
			// An exception below a candidate's staged creation may move
			// between it and the global item (a lock above blocks it).
			s.trackName(resource, ns, name, after)
			events = append(events, changes...)
			continue
		}
		for _, e := range changes { // at most one: one name
			b = newBatch(e, tenants, skip)
		}
	}
	candidateNamespaces.WithLabelValues(resource).Set(float64(len(s.candidateViews[resource])))
	if b == nil {
		return events
	}
	// The exceptions' events travel in the batch, in namespace order
	// among its members' (one name: one event per namespace).
	sort.Slice(events, func(i, j int) bool { return events[i].Namespace < events[j].Namespace })
	b.extra = events
	return []*Event{batchEvent(b, 0)}
}

// tenantList returns the tenants, sorted, made once per change of the set
// of tenants. Called with mu held for writing.
func (s *state) tenantList() *nameList {
	if s.tenants != nil {
		return s.tenants
	}
	names := make([]string, 0, len(s.namespaces))
	for n, ns := range s.namespaces {
		if s.policy.IsTenant(ns) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	s.tenants = newNameList(names)
	return s.tenants
}

// exceptions returns the namespaces whose view of the inherited item name
// of resource may differ from a lone global item: those that hold an item
// of that name (a shadow, an overlay, a lower item a lock blocks), a
// candidate for it, or exclude it, with their subtrees, which inherit what they hold or exclude. The
// global namespace's own items are not exceptions: they are the change.
// The result may hold more than the exceptions (a subtree is walked by
// parent labels, more widely than lineages are resolved), never fewer.
func (s *state) exceptions(resource, name string) sets.Set[string] {
	out := sets.New[string]()
	global := s.globalFor(resource)
	for ns := range s.holders[resource][name] {
		if ns != global {
			out.Insert(s.subtree(ns)...)
		}
	}
	// A candidate for the name below the global namespace stages a
	// creation there, which shadows or overlays the global item as the
	// source it creates would.
	for ns := range s.candidateHolders[resource][name] {
		if ns != global {
			out.Insert(s.subtree(ns)...)
		}
	}
	for ns := range s.excluders {
		for _, ex := range merge.ExclusionsOf(s.namespaces[ns]) {
			if ex.Matches(resource, name) {
				out.Insert(s.subtree(ns)...)
				break
			}
		}
	}
	return out
}
