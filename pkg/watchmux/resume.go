package watchmux

import (
	"slices"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// A resume from a past state sends, for each namespace of its scope, the
// events from the view as the client holds it to the current one (in two
// parts, below).
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

// The events go in two parts, each in (namespace, name) order, and each
// carries the version of the state the client holds after it (a client cut
// off among them resumes from the last it received, on any replica, and
// gets exactly the rest): for a version inside a change, first the rest of
// that change, at the client's own version's vector and position; then the
// difference from the view at its vector to the current one, as one change
// that moved every source the view reads (the namespaces, the resource's
// own, the fleet registration) that the client's vector is behind in
// (rv.Mid with Also). The last
// event carries the current version, with this instance's hint.

// resume is a resume's past side, prepared without mu.
type resume struct {
	resource, name string
	want           rv.Version
	p              *pastState
	// namespaces are the past side's namespaces, sorted.
	namespaces []string
	// client is each namespace's view as the client holds it; at, for a
	// version inside a change, the view after that change (at want's
	// vector), for the namespaces where they differ (want's and after).
	client, at map[string]pastView
	// shared are the past states' plain-tenant views (the state after,
	// and before for a version inside a change).
	shared []*plainViews
	// diffs caches the difference between two plain views.
	diffs map[[2]*plainViews][]*Event
	// reads are the vector's components the views of the resource are
	// merged from (readsLocked), ascending; Watch sets them.
	reads []int
	// finishing counts the events that end the client's change.
	finishing int
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
	r := &resume{resource: opts.Resource, name: opts.Name, want: want, p: p,
		client: map[string]pastView{}, at: map[string]pastView{}, diffs: map[[2]*plainViews][]*Event{}}
	inChange := func(ns string) bool { return want.Mid != nil && ns >= want.Mid.Namespace }
	if opts.Namespace != "" {
		ns := opts.Namespace
		r.namespaces = []string{ns}
		r.client[ns] = pastView{results: p.view(want, opts.Resource, ns, opts.Name)}
		if inChange(ns) {
			r.at[ns] = pastView{results: p.after.results(opts.Resource, ns, opts.Name)}
		}
		return r
	}
	after := newPlainViews(p.after, opts.Resource, opts.Name)
	r.shared = append(r.shared, after)
	before := after
	if p.before != nil {
		before = newPlainViews(p.before, opts.Resource, opts.Name)
		r.shared = append(r.shared, before)
	}
	// A namespace's view merged from pv when it is a plain tenant there.
	viewIn := func(pv *plainViews, ns string, merged func() []merge.Result) pastView {
		if pv != nil {
			if res, ok := pv.of(ns); ok {
				return pastView{results: res, plain: pv}
			}
		}
		return pastView{results: merged()}
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
		r.client[ns] = viewIn(pv, ns, func() []merge.Result { return p.view(want, opts.Resource, ns, opts.Name) })
		if inChange(ns) {
			r.at[ns] = viewIn(after, ns, func() []merge.Result { return p.after.results(opts.Resource, ns, opts.Name) })
		}
	}
	return r
}

// atVector is namespace's view at want's vector.
func (r *resume) atVector(namespace string) pastView {
	if v, ok := r.at[namespace]; ok {
		return v
	}
	return r.client[namespace]
}

// eventsIn returns the events, comparing the past side with the views of
// st: the mux's state (mu held) or a copy of it. Each event's index is its
// place among its namespace's events of its part (the client's change, or
// the difference), by name, counted over the whole view even when the
// watch is of one name; versions sets their resourceVersions.
func (r *resume) eventsIn(st *state) []*Event {
	namespaces := r.namespaces
	var current *plainViews
	if len(r.shared) > 0 {
		current = newPlainViews(st, r.resource, r.name)
		namespaces = sets.List(sets.New(r.namespaces...).Insert(st.namespaceNames()...))
	}
	var out []*Event
	if r.want.Mid != nil {
		// The rest of the client's change.
		for _, ns := range r.namespaces {
			at, ok := r.at[ns]
			if !ok {
				continue
			}
			offset := 0
			if ns == r.want.Mid.Namespace {
				offset = r.want.Mid.Index + 1
			}
			evs := r.diff(ns, r.client[ns], at)
			r.number(evs, offset, func() ([]merge.Result, []merge.Result) {
				return r.p.before.results(r.resource, ns, ""), r.p.after.results(r.resource, ns, "")
			})
			out = append(out, evs...)
		}
		r.finishing = len(out)
	}
	// The difference from want's vector to st.
	for _, ns := range namespaces {
		var now pastView
		if current != nil {
			if res, ok := current.of(ns); ok {
				now = pastView{results: res, plain: current}
			}
		}
		if now.plain == nil {
			now.results = st.results(r.resource, ns, r.name)
		}
		evs := r.diff(ns, r.atVector(ns), now)
		r.number(evs, 0, func() ([]merge.Result, []merge.Result) {
			return r.p.after.results(r.resource, ns, ""), st.results(r.resource, ns, "")
		})
		out = append(out, evs...)
	}
	return out
}

// diff returns the events between two views of namespace, computed once
// for every plain tenant with the same two views.
func (r *resume) diff(namespace string, from, to pastView) []*Event {
	if from.plain == nil || to.plain == nil {
		return diffWith(r.resource, namespace, from.results, to.results, sameContent)
	}
	key := [2]*plainViews{from.plain, to.plain}
	shared, done := r.diffs[key]
	if !done {
		shared = diffWith(r.resource, "", from.results, to.results, sameContent)
		r.diffs[key] = shared
	}
	out := make([]*Event, len(shared))
	for i, e := range shared {
		c := *e
		c.Namespace = namespace
		out[i] = &c
	}
	return out
}

// number sets the index of each of one namespace's events of a part:
// offset plus its place, or, for a watch of one name, its place among the
// events of the whole views full returns (merged only then).
func (r *resume) number(events []*Event, offset int, full func() (from, to []merge.Result)) {
	if r.name == "" {
		for i, e := range events {
			e.index = offset + i
		}
		return
	}
	if len(events) == 0 {
		return
	}
	from, to := full()
	whole := diffWith(r.resource, events[0].Namespace, from, to, sameContent)
	for _, e := range events {
		e.index = slices.IndexFunc(whole, func(x *Event) bool { return x.Name == e.Name })
	}
}

// versions sets the events' resourceVersions (see above): now is the
// current vector, last the current version, seq the current sequence.
func (r *resume) versions(events []*Event, now []uint64, last string, seq uint64) {
	var moved []rv.Part
	for _, k := range r.reads {
		if k < len(now) && k < len(r.want.Vector) && r.want.Vector[k] != now[k] {
			moved = append(moved, rv.Part{K: k, Prev: r.want.Vector[k]})
		}
	}
	for i, e := range events {
		e.RV = seq
		v := rv.Version{Fingerprint: r.want.Fingerprint}
		switch {
		case i < r.finishing:
			mid := *r.want.Mid
			mid.Index, mid.Namespace = e.index, e.Namespace
			v.Vector, v.Mid = r.want.Vector, &mid
		case len(moved) > 0:
			mid := &rv.Mid{K: moved[0].K, Prev: moved[0].Prev, Index: e.index, Namespace: e.Namespace}
			if len(moved) > 1 {
				mid.Also = moved[1:]
			}
			v.Vector, v.Mid = now, mid
		default:
			// The views differ at the same revisions of what they read
			// (a replica's revision after an informer's list is its
			// newest object's, see "Limits" in docs/design.md): no
			// version names the states between; the client's vector.
			v.Vector = r.want.Vector
		}
		e.text = v.String()
	}
	if len(events) > 0 {
		events[len(events)-1].text = last
	}
}

// readsLocked returns the components of the vector the views of resource
// are merged from (the namespaces, the resource here and in the hub, and
// the fleet registration, which decides the candidates that exist here),
// ascending. Called with mu held.
func (m *Mux) readsLocked(resource string) []int {
	var out []int
	for _, key := range []string{namespacesKey, sourceKey(resource, ""), sourceKey(resource, m.hub), m.membershipKey} {
		if k := m.pos.index(key); key != "" && k >= 0 && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
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
	return !merge.DeclaresExclusions(ns.Annotations)
}

// currentCopy is what the current views of one resource are merged from,
// copied under mu: the namespaces and the resource's sources (the objects
// themselves are never changed, only replaced, and are shared).
type currentCopy struct {
	cfg        pastConfig
	resource   string
	namespaces []*merge.Namespace
	items      []keyedItem
	// membership is the cluster's fleet registration, which decides the
	// candidates with implicit.dev/canary-clusters that exist here.
	membership membership
}

// keyedItem is a source item and its place in the mirror.
type keyedItem struct {
	namespace, name string
	item            merge.Item
}

// currentCopyLocked copies the current views' inputs of resource, in time
// linear in the namespaces and the resource's sources. Called with mu held.
func (m *Mux) currentCopyLocked(resource string) *currentCopy {
	c := &currentCopy{cfg: m.pastConfigLocked(), resource: resource, namespaces: make([]*merge.Namespace, 0, len(m.st.namespaces)),
		membership: m.st.membership}
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
	s.membership = c.membership // not listed: the mirror's, before its items are marked with it
	for i := range c.items {
		k := &c.items[i]
		s.setItemLocked(c.resource, k.namespace, k.name, &k.item)
	}
	return s
}
