package watchmux

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// Read calls f with the state as of the returned resourceVersion, under the
// read lock: f must be quick and must not keep the Reader. Everything f
// reads is of one state: a question answered inside one Read is consistent.
func (m *Mux) Read(f func(r Reader)) (rv string, err error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.synced {
		return "", errNotSynced
	}
	f(reader{m.st})
	return m.currentTextLocked(), nil
}

// Reader reads the mirror: the merged views, and the namespaces and source
// items they are merged from. Its consumers (pkg/views, pkg/authz, the
// guards of pkg/admission, the question resources of pkg/registry) build
// their answers from these reads inside one Mux.Read. What it returns is
// shared with the mirror: read only.
type Reader interface {
	// Results merges namespace's view of resource, or only item name when set.
	Results(resource, namespace, name string) []merge.Result
	// ResultsAfter merges item e.View (or e.Name) of namespace's view of resource as it
	// would be after the edit e of a source.
	ResultsAfter(resource, namespace string, e Edit) []merge.Result
	// Inherited is item name of namespace's view of resource as it would be
	// if namespace had no object of that name itself.
	Inherited(resource, namespace, name string) (merge.Result, bool)
	// Reached returns the namespaces whose view of resource an edit of a
	// source in namespace may change: every namespace for the global
	// namespace, a tenant's subtree (to the policy's MaxDepth levels), the
	// namespace alone otherwise. In no particular order.
	Reached(resource, namespace string) []string

	// Namespaces lists every namespace, sorted.
	Namespaces() []string
	// Namespace returns the namespace name, and false if it does not exist.
	Namespace(name string) (*merge.Namespace, bool)
	// Children returns the namespaces whose parent label names parent,
	// sorted, whether or not parent exists.
	Children(parent string) []string
	// Parents returns the names the namespaces' parent labels name, sorted.
	Parents() []string
	// Terminating reports whether namespace is being deleted.
	Terminating(namespace string) bool
	// Lineage is namespace's resolved lineage, as its views are merged with.
	Lineage(namespace string) merge.Lineage
	// Policy says which namespaces are tenants, and how deep lineages go.
	Policy() merge.Policy

	// Resources lists the served resources, pending ones (added at run time,
	// their sources not read yet) included, in the order they were added.
	Resources() []string
	// Serves reports whether resource is served and no longer pending.
	Serves(resource string) bool
	// Source returns the source item namespace/name of resource.
	Source(resource, namespace, name string) (merge.Item, bool)
	// SourcesIn returns namespace's source items of resource, candidates
	// included, sorted by name: the namespace's real objects.
	SourcesIn(resource, namespace string) []merge.Item
	// NameItems returns the items of namespace that a view item name is
	// merged from: the source of that name and the candidates for it
	// (merge.StageLevels puts them in its place where a viewer's stage
	// matches).
	NameItems(resource, namespace, name string) []merge.Item
	// Candidates returns namespace's candidate sources of resource
	// (malformed ones included), sorted by name, from the mirror's index.
	Candidates(resource, namespace string) []merge.Item
	// LockedNames returns the names of resource's locked source items, sorted.
	LockedNames(resource string) []string
	// Options are resource's merge options (strategy, overlayer).
	Options(resource string) merge.Options
	// GlobalNamespace is resource's global namespace.
	GlobalNamespace(resource string) string
	// GlobalNamespaces are every resource's global namespaces, sorted.
	GlobalNamespaces() []string
	// Membership is the cluster's registration on its fleet's hub: which
	// candidates with implicit.dev/canary-clusters exist here
	// (merge.Candidate.InCluster). registered is false on a server that is
	// no member of a fleet, or that its hub has not registered.
	Membership() (registered bool, clusterLabels labels.Set)
}

// Edit stands for one source item as an edit would leave it: Item nil for
// a deletion.
type Edit struct {
	Namespace, Name string
	Item            *merge.Item
	// View is the view item the edit is judged on; empty: Name. An edit of
	// a candidate is judged on the item it stages (its candidate-for).
	View string
}

type reader struct{ st *state }

var _ Reader = reader{}

func (r reader) Results(resource, namespace, name string) []merge.Result {
	return r.st.results(resource, namespace, name)
}

func (r reader) ResultsAfter(resource, namespace string, e Edit) []merge.Result {
	view := e.Name
	if e.View != "" {
		view = e.View
	}
	return r.st.resultsWith(resource, namespace, view, &override{namespace: e.Namespace, name: e.Name, item: e.Item})
}

func (r reader) Inherited(resource, namespace, name string) (merge.Result, bool) {
	res := r.st.resultsWith(resource, namespace, name, &override{namespace: namespace, name: name})
	if len(res) == 0 {
		return merge.Result{}, false
	}
	return res[0], true
}

func (r reader) Reached(resource, namespace string) []string {
	return r.st.affected(resource, namespace)
}

func (r reader) Namespaces() []string { return r.st.namespaceNames() }

func (r reader) Namespace(name string) (*merge.Namespace, bool) { return r.st.namespace(name) }

func (r reader) Children(parent string) []string { return sets.List(r.st.children[parent]) }

func (r reader) Parents() []string {
	out := make([]string, 0, len(r.st.children))
	for p, kids := range r.st.children {
		if kids.Len() > 0 {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func (r reader) Terminating(namespace string) bool { return r.st.terminating.Has(namespace) }

func (r reader) Lineage(namespace string) merge.Lineage { return r.st.lineage(namespace) }

func (r reader) Policy() merge.Policy { return r.st.policy }

func (r reader) Resources() []string { return slices.Clone(r.st.resources) }

func (r reader) Serves(resource string) bool {
	_, ok := r.st.sources[resource]
	return ok && !r.st.pending.Has(resource)
}

func (r reader) Source(resource, namespace, name string) (merge.Item, bool) {
	it, ok := r.st.sources[resource][namespace][name]
	return it, ok
}

func (r reader) SourcesIn(resource, namespace string) []merge.Item {
	byName := r.st.sources[resource][namespace]
	out := make([]merge.Item, 0, len(byName))
	for _, it := range byName {
		out = append(out, it)
	}
	slices.SortFunc(out, func(a, b merge.Item) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (r reader) NameItems(resource, namespace, name string) []merge.Item {
	return r.st.itemsFor(resource, namespace, name, nil)
}

func (r reader) Candidates(resource, namespace string) []merge.Item {
	var out []merge.Item
	for key, names := range r.st.candidates[resource] {
		if key.namespace != namespace {
			continue
		}
		for name := range names {
			out = append(out, r.st.sources[resource][namespace][name])
		}
	}
	slices.SortFunc(out, func(a, b merge.Item) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (r reader) LockedNames(resource string) []string {
	names := sets.New[string]()
	for _, byName := range r.st.sources[resource] {
		for name, it := range byName {
			if it.Locked {
				names.Insert(name)
			}
		}
	}
	return sets.List(names)
}

func (r reader) Options(resource string) merge.Options { return r.st.options[resource] }

func (r reader) GlobalNamespace(resource string) string { return r.st.globalFor(resource) }

func (r reader) GlobalNamespaces() []string { return r.st.globalNamespaces() }

func (r reader) Membership() (bool, labels.Set) {
	return r.st.membership.registered, r.st.membership.labels
}
