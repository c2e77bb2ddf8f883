package watchmux

import (
	"slices"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// state is the mirror of the host cluster the views are computed from. It is
// changed only by the feed (feed.go), one change at a time, in the order
// each informer delivers, so every view event is computed against a
// consistent before and after. Callers hold Mux.mu: read for reads, write
// for changes (the methods named ...Locked are changes).
type state struct {
	policy merge.Policy
	// resources are the served resources, in configuration order, then in
	// the order they were added at run time.
	resources []string
	// options are each resource's merge options (strategy, overlayer).
	options map[string]merge.Options
	// globals are the global namespaces of resources whose configuration
	// overrides policy.GlobalNamespace.
	globals map[string]string
	// pending holds resources added at run time whose informers have not
	// synced yet: their changes make no events, and nothing serves them.
	pending sets.Set[string]
	// namespaces by name.
	namespaces map[string]*merge.Namespace
	// children maps a parent label value to the namespaces that carry it,
	// whether or not the parent exists.
	children map[string]sets.Set[string]
	// sources maps resource -> namespace -> name -> source item.
	sources map[string]map[string]map[string]merge.Item
	// counts is the number of source items per resource.
	counts map[string]int
	// terminating holds the namespaces being deleted.
	terminating sets.Set[string]
	// generations holds the version of the last view event of each
	// existing namespace, all resources: a decision derived from a
	// namespace's views is current while its generation is unchanged.
	// Versions are never reused, so a namespace deleted and created again
	// never repeats an earlier generation, and a deleted namespace's entry
	// goes with it (namespaces come and go; the map must not only grow).
	generations map[string]uint64

	// tenants caches the tenants, sorted: the namespaces a batch is made
	// of. nil when a namespace came, went or changed tenancy since it was
	// made; it is replaced, never changed, so batches share it.
	tenants *nameList
	// holders maps resource -> name -> the namespaces holding a source of
	// that name: the namespaces that may shadow or overlay an inherited
	// item of that name.
	holders map[string]map[string]sets.Set[string]
	// excluders are the namespaces that carry exclusions.
	excluders sets.Set[string]

	// candidates maps resource -> (namespace, stable name) -> the names of
	// the candidates for that name in that namespace (merge.Item.Candidate),
	// malformed ones included: a per-name merge of a view passes them with
	// the stable name's items, so StageLevels sees them.
	candidates map[string]map[candidateKey]sets.Set[string]
	// candidateHolders maps resource -> stable name -> the namespaces holding
	// a candidate for it: like holders, they may change an inherited item of
	// that name for their subtree (a staged creation shadows it).
	candidateHolders map[string]map[string]sets.Set[string]
	// candidateCounts is the number of candidates per resource.
	candidateCounts map[string]int
	// candidateViews maps resource -> namespace -> the names of its view
	// items built from a candidate (merge.Result.Candidates), kept up to
	// date with the view events, for the implicit_candidate_namespaces gauge.
	candidateViews map[string]map[string]sets.Set[string]

	// lineMu guards lineages, which readers fill under Mux.mu's read lock.
	lineMu sync.Mutex
	// lineages caches each existing namespace's resolved lineage. A
	// namespace change drops the entries of the namespaces whose walk reads
	// it (its subtree), under the write lock, so every entry is always
	// current, and a deleted namespace's entry goes with it. Entries are
	// shared: read only.
	lineages map[string]merge.Lineage
}

func newState(policy merge.Policy, resources []string) *state {
	s := &state{
		policy:      policy,
		resources:   resources,
		namespaces:  map[string]*merge.Namespace{},
		children:    map[string]sets.Set[string]{},
		sources:     map[string]map[string]map[string]merge.Item{},
		counts:      map[string]int{},
		options:     map[string]merge.Options{},
		globals:     map[string]string{},
		pending:     sets.New[string](),
		terminating: sets.New[string](),
		generations: map[string]uint64{},
		lineages:    map[string]merge.Lineage{},
		holders:     map[string]map[string]sets.Set[string]{},
		excluders:   sets.New[string](),

		candidates:       map[string]map[candidateKey]sets.Set[string]{},
		candidateHolders: map[string]map[string]sets.Set[string]{},
		candidateCounts:  map[string]int{},
		candidateViews:   map[string]map[string]sets.Set[string]{},
	}
	for _, r := range resources {
		s.initResource(r)
	}
	return s
}

func (s *state) namespace(name string) (*merge.Namespace, bool) {
	ns, ok := s.namespaces[name]
	return ns, ok
}

// lineage resolves namespace's lineage, once per change of what it reads.
func (s *state) lineage(namespace string) merge.Lineage {
	s.lineMu.Lock()
	l, ok := s.lineages[namespace]
	s.lineMu.Unlock()
	if ok {
		return l
	}
	// Mux.mu is held, read or write: no change can come between the walk
	// and the store.
	l = merge.Resolve(s.policy, namespace, s.namespace)
	if l.Namespace == nil {
		// Not cached: any name can be asked for (an authorization request
		// names any namespace), and the cache holds existing ones only.
		return l
	}
	s.lineMu.Lock()
	s.lineages[namespace] = l
	s.lineMu.Unlock()
	return l
}

// setNamespaceLocked records ns, or removes name when ns is nil.
func (s *state) setNamespaceLocked(name string, ns *merge.Namespace) {
	// The walks that read name are those of its subtree: drop their
	// lineages (they may hold the old object, or its absence). Nothing is
	// cached before the first read, so loading the namespaces costs nothing.
	s.lineMu.Lock()
	if len(s.lineages) > 0 {
		for _, n := range s.subtree(name) {
			delete(s.lineages, n)
		}
	}
	s.lineMu.Unlock()
	old, had := s.namespaces[name]
	if !had || ns == nil || s.policy.IsTenant(old) != s.policy.IsTenant(ns) {
		s.tenants = nil
	}
	s.excluders.Delete(name)
	if ns != nil {
		if _, ok := ns.Annotations[merge.AnnotationExclude]; ok {
			s.excluders.Insert(name)
		}
	}
	if had {
		if p := old.Labels[merge.LabelParent]; p != "" {
			s.children[p].Delete(name)
			if s.children[p].Len() == 0 {
				delete(s.children, p)
			}
		}
		delete(s.namespaces, name)
	}
	if ns == nil {
		// A global namespace's generation stands for the batches' members
		// (LineageGeneration): it must never go back to an earlier value.
		if !s.isGlobal(name) {
			delete(s.generations, name)
		}
		return
	}
	s.namespaces[name] = ns
	if p := ns.Labels[merge.LabelParent]; p != "" {
		if s.children[p] == nil {
			s.children[p] = sets.New[string]()
		}
		s.children[p].Insert(name)
	}
}

// initResource makes the per-resource maps of resource.
func (s *state) initResource(resource string) {
	s.sources[resource] = map[string]map[string]merge.Item{}
	s.holders[resource] = map[string]sets.Set[string]{}
	s.candidates[resource] = map[candidateKey]sets.Set[string]{}
	s.candidateHolders[resource] = map[string]sets.Set[string]{}
	s.candidateViews[resource] = map[string]sets.Set[string]{}
}

// candidateKey is a stable name in a namespace.
type candidateKey struct{ namespace, name string }

// setItemLocked records it, or removes namespace/name when it is nil.
func (s *state) setItemLocked(resource, namespace, name string, it *merge.Item) {
	byNS := s.sources[resource]
	old, had := byNS[namespace][name]
	if had && old.Candidate != nil {
		s.indexCandidate(resource, namespace, name, old.Candidate.For, false)
	}
	if it != nil && it.Candidate != nil {
		s.indexCandidate(resource, namespace, name, it.Candidate.For, true)
	}
	holders := s.holders[resource]
	if it == nil {
		if had {
			s.counts[resource]--
			holders[name].Delete(namespace)
			if holders[name].Len() == 0 {
				delete(holders, name)
			}
		}
		delete(byNS[namespace], name)
		if len(byNS[namespace]) == 0 {
			delete(byNS, namespace)
		}
		return
	}
	if byNS[namespace] == nil {
		byNS[namespace] = map[string]merge.Item{}
	}
	if !had {
		s.counts[resource]++
		if holders[name] == nil {
			holders[name] = sets.New[string]()
		}
		holders[name].Insert(namespace)
	}
	byNS[namespace][name] = *it
}

// indexCandidate adds (or removes) the candidate name for the stable name
// forName in namespace to the candidate indexes.
func (s *state) indexCandidate(resource, namespace, name, forName string, add bool) {
	key := candidateKey{namespace, forName}
	byKey, byFor := s.candidates[resource], s.candidateHolders[resource]
	if add {
		if byKey[key] == nil {
			byKey[key] = sets.New[string]()
		}
		byKey[key].Insert(name)
		if byFor[forName] == nil {
			byFor[forName] = sets.New[string]()
		}
		byFor[forName].Insert(namespace)
		s.candidateCounts[resource]++
		return
	}
	byKey[key].Delete(name)
	if byKey[key].Len() == 0 {
		delete(byKey, key)
		byFor[forName].Delete(namespace)
		if byFor[forName].Len() == 0 {
			delete(byFor, forName)
		}
	}
	s.candidateCounts[resource]--
}

// hasCandidatesFor reports whether namespace holds a candidate for the
// stable name of resource.
func (s *state) hasCandidatesFor(resource, namespace, name string) bool {
	return s.candidates[resource][candidateKey{namespace, name}].Len() > 0
}

// anyCandidates reports whether any served resource has a candidate.
func (s *state) anyCandidates() bool {
	for _, n := range s.candidateCounts {
		if n > 0 {
			return true
		}
	}
	return false
}

// trackName records whether namespace's view item name of resource, as
// after holds it (the merge of that name alone), is built from a candidate.
func (s *state) trackName(resource, namespace, name string, after []merge.Result) {
	views := s.candidateViews[resource]
	if len(after) > 0 && after[0].Item.Name == name && after[0].Candidates() != "" {
		if views[namespace] == nil {
			views[namespace] = sets.New[string]()
		}
		views[namespace].Insert(name)
		return
	}
	if views[namespace] == nil {
		return
	}
	views[namespace].Delete(name)
	if views[namespace].Len() == 0 {
		delete(views, namespace)
	}
}

// trackView records which of namespace's view items of resource, as the
// whole view after holds them, are built from a candidate.
func (s *state) trackView(resource, namespace string, after []merge.Result) {
	views := s.candidateViews[resource]
	delete(views, namespace)
	for _, r := range after {
		if r.Candidates() != "" {
			if views[namespace] == nil {
				views[namespace] = sets.New[string]()
			}
			views[namespace].Insert(r.Item.Name)
		}
	}
}

// subtree returns name and every namespace that names it as an ancestor
// near enough to inherit from it, following parent labels down; a cycle is
// walked once. Near enough is policy.MaxDepth levels (all without a
// limit): a namespace farther below never reads name, nor anything about
// it (Resolve stops MaxDepth ancestors up), so its views don't depend on
// name. The cost is linear in the size of what is returned.
func (s *state) subtree(name string) []string {
	out := []string{name}
	seen := sets.New(name)
	// level is the first index of out at the current depth below name.
	for depth, level := 0, 0; level < len(out); depth++ {
		if s.policy.MaxDepth > 0 && depth == s.policy.MaxDepth {
			break
		}
		end := len(out)
		for i := level; i < end; i++ {
			for child := range s.children[out[i]] {
				if !seen.Has(child) {
					seen.Insert(child)
					out = append(out, child)
				}
			}
		}
		level = end
	}
	return out
}

// affected returns the namespaces whose views a change of a source object
// in namespace may change: every namespace for the global namespace (its own
// view, and every tenant's), the subtree of a tenant (to policy.MaxDepth
// levels), the namespace alone otherwise.
func (s *state) affected(resource, namespace string) []string {
	if namespace == s.globalFor(resource) {
		out := make([]string, 0, len(s.namespaces))
		for n, ns := range s.namespaces {
			if n == namespace || s.policy.IsTenant(ns) {
				out = append(out, n)
			}
		}
		return out
	}
	ns, ok := s.namespaces[namespace]
	if !ok || !s.policy.IsTenant(ns) {
		return []string{namespace}
	}
	return s.subtree(namespace)
}

// results merges namespace's view of resource. With name set, only that
// item is merged. Results are sorted by name.
func (s *state) results(resource, namespace, name string) []merge.Result {
	return s.resultsWith(resource, namespace, name, nil)
}

// override stands for one source item as a change would leave it: Item nil
// for a deletion.
type override struct {
	namespace, name string
	item            *merge.Item
}

// resultsWith is results as if the override were applied (name must be set
// when o is).
func (s *state) resultsWith(resource, namespace, name string, o *override) []merge.Result {
	lineage := s.lineage(namespace)
	byNS := s.sources[resource]
	if name != "" {
		lineage = relevantAncestors(lineage, byNS, s.candidates[resource], name, o)
	}
	levels := merge.Levels(lineage, s.globalFor(resource), func(ns string) []merge.Item {
		items := byNS[ns]
		if name != "" {
			return s.itemsFor(resource, ns, name, o)
		}
		out := make([]merge.Item, 0, len(items))
		for _, it := range items {
			out = append(out, it)
		}
		// Map order is random; merge needs none, but sorted input keeps
		// conflict messages deterministic.
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return out
	})
	out := merge.MergeWith(resource, levels, s.options[resource])
	if name != "" {
		// The candidates passed along stay under their own names on the
		// local level (the viewer's own namespace shows them as they are):
		// they are other items of the view.
		out = slices.DeleteFunc(out, func(r merge.Result) bool { return r.Item.Name != name })
	}
	return out
}

// itemsFor returns the items of namespace that the view item name may be
// merged from: the source of that name, and the candidates for it (which
// StageLevels puts in its place, or adds as a staged creation), with the
// override applied. o.name may be another name than name: an edit of a
// candidate for name.
func (s *state) itemsFor(resource, namespace, name string, o *override) []merge.Item {
	items := s.sources[resource][namespace]
	var out []merge.Item
	overrides := func(n string) bool { return o != nil && o.namespace == namespace && o.name == n }
	if overrides(name) {
		if o.item != nil {
			out = append(out, *o.item)
		}
	} else if it, ok := items[name]; ok {
		out = append(out, it)
	}
	if cands := s.candidates[resource][candidateKey{namespace, name}]; cands.Len() > 0 {
		for _, c := range sets.List(cands) {
			if c != name && !overrides(c) {
				out = append(out, items[c])
			}
		}
	}
	if o != nil && o.namespace == namespace && o.name != name && o.item != nil &&
		o.item.Candidate != nil && o.item.Candidate.For == name {
		out = append(out, *o.item)
	}
	return out
}

// relevantAncestors returns l with only the ancestors that may change item
// name of its view: those with a source of that name or a candidate for it
// (or the override's namespace) and those with exclusions. Merging skips the others anyway
// (they add no level content), but a deep lineage would fill the levels
// with them, for every namespace a change reaches. l's own slices are
// shared (cached): the result has a new one, or none.
func relevantAncestors(l merge.Lineage, byNS map[string]map[string]merge.Item, candidates map[candidateKey]sets.Set[string], name string, o *override) merge.Lineage {
	var kept []*merge.Namespace
	for _, a := range l.Ancestors {
		_, has := byNS[a.Name][name]
		staged := candidates[candidateKey{a.Name, name}].Len() > 0
		_, excludes := a.Annotations[merge.AnnotationExclude]
		if has || staged || excludes || (o != nil && o.namespace == a.Name) {
			kept = append(kept, a)
		}
	}
	l.Ancestors = kept
	return l
}

// globalFor returns the global namespace of resource.
func (s *state) globalFor(resource string) string {
	if g, ok := s.globals[resource]; ok {
		return g
	}
	return s.policy.GlobalNamespace
}

// isGlobal reports whether namespace is a global namespace, the policy's or
// a resource's own.
func (s *state) isGlobal(namespace string) bool {
	if namespace == s.policy.GlobalNamespace {
		return true
	}
	for _, g := range s.globals {
		if g == namespace {
			return true
		}
	}
	return false
}

// globalNamespaces returns every global namespace, sorted: the policy's and
// the resources' own.
func (s *state) globalNamespaces() []string {
	set := sets.New(s.policy.GlobalNamespace)
	for _, g := range s.globals {
		set.Insert(g)
	}
	return sets.List(set)
}

// addResourceLocked serves resource from now on, pending until its sources are read.
func (s *state) addResourceLocked(resource string, o merge.Options) {
	s.resources = append(s.resources, resource)
	s.initResource(resource)
	s.options[resource] = o
	s.pending.Insert(resource)
}

// namespaceNames returns every namespace, sorted.
func (s *state) namespaceNames() []string {
	out := make([]string, 0, len(s.namespaces))
	for n := range s.namespaces {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// sourceCount is the number of source objects of resource.
func (s *state) sourceCount(resource string) int { return s.counts[resource] }
