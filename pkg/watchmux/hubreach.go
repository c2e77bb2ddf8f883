package watchmux

import (
	"sort"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// GlobalReach is what a member reports to its hub (pkg/fleet): the global
// namespaces' items and how many tenants' views hold each, counts only.
type GlobalReach struct {
	// Tenants counts the tenant namespaces: those that inherit the global
	// scope.
	Tenants int
	// Items are the served resources' global items, candidates included,
	// by resource (in the order served) then name.
	Items []GlobalItemReach
}

// GlobalItemReach is one item of a global namespace and its reach.
type GlobalItemReach struct {
	Resource string
	// Item is the source as the mirror holds it (read only).
	Item merge.Item
	// Namespaces counts, for an ordinary source, the tenants whose view
	// item holds it from the global scope (as the item, or the base of its
	// overlays), not replaced by a candidate; for a candidate, the tenants
	// that see it in its stable source's place (canaries).
	Namespaces int
	// Stable is a candidate's only: the tenants that don't see it and whose
	// view holds its stable source from the global scope, or, when no
	// stable source exists (a staged creation), would hold the created
	// source.
	Stable int
}

// GlobalReach counts, under the read lock, how many tenants' views hold
// each item of the global namespaces. The count is exact: it is what a
// list of every tenant's view would show. Most tenants see a global name
// alike; as globalChangeLocked does, only the exceptions (namespaces that
// hold, exclude or stage that name, with their subtrees) are merged one by
// one, and one representative stands for the others. The others are split
// by their implicit.dev/stage label only for a name with a candidate in the
// global namespace, which stages it by the viewer's stage. The cost is one
// pass over the namespaces, then per global name the exceptions' merges
// plus one per stage: never tenants × items.
func (m *Mux) GlobalReach() (GlobalReach, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.synced {
		return GlobalReach{}, errNotSynced
	}
	return m.st.globalReach(), nil
}

// tenantGroups are the tenants, grouped by stage.
type tenantGroups struct {
	all     []string
	stageOf map[string]string // tenant -> group key
	byStage map[string][]string
}

// stageKey is a namespace's group key: its stage label, or its absence.
func stageKey(ns *merge.Namespace) string {
	if v, ok := ns.Labels[v1alpha1.LabelStage]; ok {
		return "=" + v
	}
	return ""
}

func (s *state) tenantGroups() tenantGroups {
	g := tenantGroups{stageOf: map[string]string{}, byStage: map[string][]string{}}
	for n, ns := range s.namespaces {
		if !s.policy.IsTenant(ns) {
			continue
		}
		k := stageKey(ns)
		g.all = append(g.all, n)
		g.stageOf[n] = k
		g.byStage[k] = append(g.byStage[k], n)
	}
	return g
}

func (s *state) globalReach() GlobalReach {
	groups := s.tenantGroups()
	out := GlobalReach{Tenants: len(groups.all)}
	for _, resource := range s.resources {
		if s.pending.Has(resource) {
			continue
		}
		out.Items = append(out.Items, s.globalReachOf(resource, groups)...)
	}
	return out
}

// globalReachOf counts the reach of resource's global items.
func (s *state) globalReachOf(resource string, groups tenantGroups) []GlobalItemReach {
	global := s.globalFor(resource)
	items := s.sources[resource][global]
	if len(items) == 0 {
		return nil
	}
	// The view names the global items may show under: an ordinary
	// source's own, a candidate's stable name.
	names := sets.New[string]()
	for _, it := range items {
		switch {
		case it.Candidate == nil:
			names.Insert(it.Name)
		case it.Candidate.For != "":
			names.Insert(it.Candidate.For)
		}
	}
	sources := map[string]int{}  // ordinary source name -> tenants
	canaries := map[string]int{} // candidate name -> tenants
	holds := func(rs []merge.Result, weight int) {
		if len(rs) == 0 {
			return
		}
		for _, it := range append([]merge.Item{rs[0].Item}, rs[0].Overlays...) {
			if it.Namespace != global {
				continue
			}
			if it.FromCandidate != "" {
				canaries[it.FromCandidate] += weight
			} else {
				sources[it.Name] += weight
			}
			return
		}
	}
	for _, name := range sets.List(names) {
		s.eachView(resource, name, nil, groups, holds)
	}
	out := make([]GlobalItemReach, 0, len(items))
	for _, it := range items {
		r := GlobalItemReach{Resource: resource, Item: it}
		switch {
		case it.Candidate == nil:
			r.Namespaces = sources[it.Name]
		default:
			r.Namespaces = canaries[it.Name]
			if it.Candidate.For == "" {
				break
			}
			if stable, ok := items[it.Candidate.For]; ok && stable.Candidate == nil {
				r.Stable = sources[it.Candidate.For]
				break
			}
			// A staged creation: the tenants that would inherit the
			// source it creates, and don't see the candidate.
			created := it
			created.Name, created.Candidate = it.Candidate.For, nil
			o := &override{namespace: global, name: created.Name, item: &created}
			s.eachView(resource, created.Name, o, groups, func(rs []merge.Result, weight int) {
				if len(rs) > 0 && rs[0].Item.Namespace == global && rs[0].Item.FromCandidate == "" {
					r.Stable += weight
				}
			})
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Item.Name < out[j].Item.Name })
	return out
}

// eachView calls f with the merge of item name in the tenants' views (as o
// would leave it, when set), once per distinct merge, with the number of
// tenants it stands for.
func (s *state) eachView(resource, name string, o *override, groups tenantGroups, f func(rs []merge.Result, weight int)) {
	skip := s.exceptions(resource, name)
	global := s.globalFor(resource)
	var excepted []string
	perGroup := map[string]int{}
	for n := range skip {
		k, tenant := groups.stageOf[n]
		if !tenant {
			continue
		}
		excepted = append(excepted, n)
		perGroup[k]++
	}
	alike := map[string][]string{"": groups.all}
	if s.candidates[resource][candidateKey{global, name}].Len() > 0 {
		alike = groups.byStage
	}
	for k, members := range alike {
		weight := len(members) - perGroup[k]
		if len(alike) == 1 {
			weight = len(members) - len(excepted)
		}
		if weight <= 0 {
			continue
		}
		for _, n := range members {
			if !skip.Has(n) {
				f(s.resultsWith(resource, n, name, o), weight)
				break
			}
		}
	}
	for _, n := range excepted {
		f(s.resultsWith(resource, n, name, o), 1)
	}
}
