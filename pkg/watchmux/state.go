package watchmux

import (
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
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
	// membership is this cluster's registration on its fleet's hub
	// (membership.go): which candidates carrying implicit.dev/canary-clusters
	// exist here.
	membership membership
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
		if merge.DeclaresExclusions(ns.Annotations) {
			s.excluders.Insert(name)
		}
	}
	if had {
		if p := old.Labels[v1alpha1.LabelParent]; p != "" {
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
	if p := ns.Labels[v1alpha1.LabelParent]; p != "" {
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

// setItemLocked records it, or removes namespace/name when it is nil.
func (s *state) setItemLocked(resource, namespace, name string, it *merge.Item) {
	if it != nil && it.Candidate != nil && it.Candidate.Clusters != nil {
		in := *it
		in.Candidate = it.Candidate.InCluster(s.membership.registered, s.membership.labels)
		it = &in
	}
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
