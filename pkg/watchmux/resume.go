package watchmux

import (
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// A resume from a past state sends, for each namespace of its scope, the
// difference between the view as the client holds it and the current one.
// The past side needs no lock: it is merged before Watch takes mu's read
// lock. For one namespace, the current view is merged and compared under
// it. For all namespaces, Watch copies under it what the current views are
// merged from (the namespaces and the resource's sources: no merge), and
// merges and compares after releasing it. And most tenants hold the same view but for the namespace: a
// tenant whose lineage (itself and its ancestors) holds no source of the
// resource and excludes nothing merges the global namespace's items alone,
// as every such tenant does (the invariant a global edit's batch rests on).
// Their view is merged once per state, their difference computed once and
// given to each of them.

// resume is a resume's past side, prepared without mu.
type resume struct {
	resource, name string
	// namespaces are the past side's namespaces, sorted.
	namespaces []string
	past       map[string]pastView
	// shared are the past states' plain-tenant views (the state after,
	// and before for a version inside a change).
	shared []*plainViews
	// diffs caches the difference of a past plain view to the current one.
	diffs map[*plainViews][]*Event
}

// pastView is one namespace's view as the client holds it; plain, when
// set, says it is that state's plain-tenant view.
type pastView struct {
	results []merge.Result
	plain   *plainViews
}

// resumeEvents prepares the events that take a client of opts' scope at
// want to the current views: the past side, merged without mu.
func (m *Mux) resumeEvents(p *pastState, want rv.Version, opts WatchOptions) *resume {
	r := &resume{resource: opts.Resource, name: opts.Name, past: map[string]pastView{}, diffs: map[*plainViews][]*Event{}}
	if opts.Namespace != "" {
		r.namespaces = []string{opts.Namespace}
		r.past[opts.Namespace] = pastView{results: p.view(want, opts.Resource, opts.Namespace, opts.Name)}
		return r
	}
	after := newPlainViews(p.after, opts.Resource, opts.Name)
	r.shared = append(r.shared, after)
	before := after
	if p.before != nil {
		before = newPlainViews(p.before, opts.Resource, opts.Name)
		r.shared = append(r.shared, before)
	}
	r.namespaces = p.namespaces()
	for _, ns := range r.namespaces {
		// The namespaces before want's in order hold the view at the
		// vector, those after it the view before the change, and want's
		// own a part of the change (see pastState.view).
		var pv *plainViews
		switch {
		case want.Mid == nil || ns < want.Mid.Namespace:
			pv = after
		case ns > want.Mid.Namespace:
			pv = before
		}
		if pv != nil {
			if res, ok := pv.of(ns); ok {
				r.past[ns] = pastView{results: res, plain: pv}
				continue
			}
		}
		r.past[ns] = pastView{results: p.view(want, opts.Resource, ns, opts.Name)}
	}
	return r
}

// eventsIn returns the events, comparing the past side with the views of
// st: the mux's state (mu held) or a copy of it.
func (r *resume) eventsIn(st *state) []*Event {
	namespaces := r.namespaces
	var current *plainViews
	if len(r.shared) > 0 {
		current = newPlainViews(st, r.resource, r.name)
		namespaces = sets.List(sets.New(r.namespaces...).Insert(st.namespaceNames()...))
	}
	var out []*Event
	for _, ns := range namespaces {
		past := r.past[ns]
		if past.plain != nil && current != nil {
			if now, ok := current.of(ns); ok {
				shared, done := r.diffs[past.plain]
				if !done {
					shared = diffWith(r.resource, "", past.results, now, sameContent)
					r.diffs[past.plain] = shared
				}
				for _, e := range shared {
					c := *e
					c.Namespace = ns
					out = append(out, &c)
				}
				continue
			}
		}
		out = append(out, diffWith(r.resource, ns, past.results, st.results(r.resource, ns, r.name), sameContent)...)
	}
	return out
}

// plainViews finds a state's plain tenants (see above) and merges their
// view once.
type plainViews struct {
	st             *state
	resource, name string
	// ok: the shortcut applies. Not when the global namespace holds
	// candidates: staging them depends on the viewing namespace.
	ok     bool
	merged bool
	view   []merge.Result
}

func newPlainViews(st *state, resource, name string) *plainViews {
	pv := &plainViews{st: st, resource: resource, name: name, ok: true}
	for _, it := range st.sources[resource][st.globalFor(resource)] {
		if it.Candidate != nil {
			pv.ok = false
			break
		}
	}
	return pv
}

// of returns namespace's view and true when it is a plain tenant.
func (pv *plainViews) of(namespace string) ([]merge.Result, bool) {
	if !pv.ok || !pv.st.plainTenant(pv.resource, namespace) {
		return nil, false
	}
	if !pv.merged {
		pv.view, pv.merged = pv.st.results(pv.resource, namespace, pv.name), true
	}
	return pv.view, true
}

// plainTenant reports whether namespace is a tenant whose lineage holds no
// source of resource and excludes nothing: its view is the global
// namespace's items merged alone.
func (s *state) plainTenant(resource, namespace string) bool {
	ns, ok := s.namespaces[namespace]
	if !ok || !s.policy.IsTenant(ns) || namespace == s.globalFor(resource) || !s.plainLevel(resource, ns) {
		return false
	}
	for _, a := range s.lineage(namespace).Ancestors {
		if !s.plainLevel(resource, a) {
			return false
		}
	}
	return true
}

// plainLevel reports whether ns adds nothing to a view of resource: no
// source, no exclusion.
func (s *state) plainLevel(resource string, ns *merge.Namespace) bool {
	if len(s.sources[resource][ns.Name]) > 0 {
		return false
	}
	_, excludes := ns.Annotations[merge.AnnotationExclude]
	return !excludes
}

// currentCopy is what the current views of one resource are merged from,
// copied under mu: the namespaces and the resource's sources (the objects
// themselves are never changed, only replaced, and are shared).
type currentCopy struct {
	cfg        pastConfig
	resource   string
	namespaces []*merge.Namespace
	items      []keyedItem
}

// keyedItem is a source item and its place in the mirror.
type keyedItem struct {
	namespace, name string
	item            merge.Item
}

// currentCopyLocked copies the current views' inputs of resource, in time
// linear in the namespaces and the resource's sources. Called with mu held.
func (m *Mux) currentCopyLocked(resource string) *currentCopy {
	c := &currentCopy{cfg: m.pastConfigLocked(), resource: resource, namespaces: make([]*merge.Namespace, 0, len(m.st.namespaces))}
	for _, ns := range m.st.namespaces {
		c.namespaces = append(c.namespaces, ns)
	}
	for ns, byName := range m.st.sources[resource] {
		for name, it := range byName {
			c.items = append(c.items, keyedItem{ns, name, it})
		}
	}
	return c
}

// build makes a state of the copy, as the mux's was when it was taken.
func (c *currentCopy) build() *state {
	s := c.cfg.buildWith(c.namespaces, nil)
	for i := range c.items {
		k := &c.items[i]
		s.setItemLocked(c.resource, k.namespace, k.name, &k.item)
	}
	return s
}
