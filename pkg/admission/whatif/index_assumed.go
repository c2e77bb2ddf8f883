package whatif

import (
	"sort"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// The parent guard asks what a change of one namespace's labels and
// annotations would do to the views, assuming the changes it has admitted
// that the mirror may not show yet.

// NamespaceMeta is what a namespace change sets of the labels and
// annotations merging reads: the parent label, the inherit label, the
// recorded parent uid, the exclusions.
type NamespaceMeta struct {
	Labels      map[string]string
	Annotations map[string]string
	// Gone: the namespace's deletion was admitted; it is assumed not to
	// exist.
	Gone bool
}

// Assumed are namespaces whose labels and annotations the guards assume as
// given instead of as the mirror has them: changes admitted a moment ago.
// A namespace the mirror does not have yet (just created) is assumed to
// exist with them.
type Assumed map[string]NamespaceMeta

// LockedItem is a locked source item that some views would lose.
type LockedItem struct {
	// Resource is the view resource; Namespace and Name the source's.
	Resource, Namespace, Name string
	// Viewers are the namespaces whose views would lose it, sorted.
	Viewers []string
}

// ParentCycleAssuming answers the guards: the cycle that setting namespace's
// parent label to parent would close, namespace first, or nil, with
// assumed applied.
func (x *Index) ParentCycleAssuming(namespace, parent string, assumed Assumed) (cycle []string) {
	_ = x.read(func(r watchmux.Reader) { cycle = parentCycle(assuming(r, assumed), namespace, parent) })
	return cycle
}

// GoingAway answers the guards: the first namespace from namespace up its
// parent labels, namespace included, that is being deleted (Terminating in
// the mirror, or its deletion admitted a moment ago: assumed Gone), or "".
func (x *Index) GoingAway(namespace string, assumed Assumed) (away string) {
	_ = x.read(func(r watchmux.Reader) {
		get := assuming(r, assumed)
		seen := sets.New[string]()
		for cur := namespace; cur != "" && !seen.Has(cur); {
			seen.Insert(cur)
			if a, ok := assumed[cur]; ok && a.Gone || r.Terminating(cur) {
				away = cur
				return
			}
			ns, ok := get(cur)
			if !ok {
				return
			}
			cur = ns.Labels[v1alpha1.LabelParent]
		}
	})
	return away
}

// GoingAwayBelow answers the guards: the first namespace of namespace's
// subtree, namespace included, in the order subtreeAssuming lists them,
// that is being deleted (Terminating in the mirror, or assumed Gone) while
// some namespace still names it as parent, or "".
func (x *Index) GoingAwayBelow(namespace string, assumed Assumed) (away string) {
	_ = x.read(func(r watchmux.Reader) {
		for _, n := range subtreeAssuming(r, namespace, assumed) {
			if a, ok := assumed[n]; (ok && a.Gone || r.Terminating(n)) && len(subtreeAssuming(r, n, assumed)) > 1 {
				away = n
				return
			}
		}
	})
	return away
}

// parentCycle walks parent labels up from parent, with the namespaces get
// returns, and returns the cycle through namespace it closes, or nil.
func parentCycle(get merge.NamespaceGetter, namespace, parent string) []string {
	path := []string{namespace}
	seen := sets.New(namespace)
	for cur := parent; cur != ""; {
		path = append(path, cur)
		if cur == namespace {
			return path
		}
		if seen.Has(cur) {
			return nil // a cycle above, not through namespace
		}
		seen.Insert(cur)
		ns, ok := get(cur)
		if !ok {
			return nil
		}
		cur = ns.Labels[v1alpha1.LabelParent]
	}
	return nil
}

func assuming(r watchmux.Reader, assumed Assumed) merge.NamespaceGetter {
	return func(name string) (*merge.Namespace, bool) {
		ns, ok := r.Namespace(name)
		a, isAssumed := assumed[name]
		switch {
		case !isAssumed:
			return ns, ok
		case a.Gone:
			return nil, false
		case !ok:
			return &merge.Namespace{Name: name, Labels: a.Labels, Annotations: a.Annotations}, true
		}
		c := *ns
		c.Labels, c.Annotations = a.Labels, a.Annotations
		return &c, true
	}
}

// subtreeAssuming returns name and every namespace that names it as an
// ancestor, each once, with assumed applied.
func subtreeAssuming(r watchmux.Reader, name string, assumed Assumed) []string {
	get := assuming(r, assumed)
	extra := map[string][]string{}
	for child, a := range assumed {
		if p := a.Labels[v1alpha1.LabelParent]; p != "" {
			extra[p] = append(extra[p], child)
		}
	}
	out := []string{name}
	seen := sets.New(name)
	for i := 0; i < len(out); i++ {
		cur := out[i]
		candidates := append(r.Children(cur), extra[cur]...)
		sort.Strings(candidates)
		for _, child := range candidates {
			ns, ok := get(child)
			if seen.Has(child) || !ok || ns.Labels[v1alpha1.LabelParent] != cur {
				continue
			}
			seen.Insert(child)
			out = append(out, child)
		}
	}
	return out
}

// viewAssuming merges the item name of namespace's view of resource, with
// the namespaces get returns.
func viewAssuming(r watchmux.Reader, resource, namespace, name string, get merge.NamespaceGetter) []merge.Result {
	return merge.View(r, resource, merge.Resolve(r.Policy(), namespace, get), func(ns string) []merge.Item {
		if it, ok := r.Source(resource, ns, name); ok {
			return []merge.Item{it}
		}
		return nil
	})
}

// viewStaged is viewAssuming with the candidates for name merged too, each
// standing in for name where the viewer's stage matches (merge.Levels).
func viewStaged(r watchmux.Reader, resource, namespace, name string, get merge.NamespaceGetter) []merge.Result {
	return merge.View(r, resource, merge.Resolve(r.Policy(), namespace, get), func(ns string) []merge.Item {
		return sourceAndCandidates(r, resource, ns, name)
	})
}

// ownNames are the names namespace holds objects of (candidates included:
// they are real objects there), in the mirror or pending, sorted.
func ownNames(r watchmux.Reader, pending Pending, resource, namespace string) []string {
	names := sets.New[string]()
	for _, it := range r.SourcesIn(resource, namespace) {
		names.Insert(it.Name)
	}
	for _, o := range pending.Owned {
		if o.Resource == resource && o.Namespace == namespace {
			names.Insert(o.Name)
		}
	}
	return sets.List(names)
}

// NamespaceMeta answers the guards: the labels and annotations the mirror
// holds of namespace, and whether it holds the namespace at all.
func (x *Index) NamespaceMeta(namespace string) (meta NamespaceMeta, found bool) {
	_ = x.read(func(r watchmux.Reader) {
		var ns *merge.Namespace
		if ns, found = r.Namespace(namespace); found {
			meta = NamespaceMeta{Labels: ns.Labels, Annotations: ns.Annotations}
		}
	})
	return meta, found
}

// InheritedAssuming answers the guards: the item of name that namespace's
// view would show without an object of its own, with assumed applied. A
// namespace neither the mirror nor assumed holds is taken as just created
// with no labels: a tenant that inherits the global sources (a namespace and
// an object created back to back reach the guards before the mirror shows
// the namespace). The pending source writes are applied. Candidates are
// left out: a candidate of a locked source is locked as it is (Inherited,
// from the mirror, weighs them).
func (x *Index) InheritedAssuming(resource, namespace, name string, assumed Assumed, pending Pending) (res merge.Result, found bool, err error) {
	err = x.read(func(mirror watchmux.Reader) {
		r := pending.over(mirror)
		if !isServed(r, resource) {
			return
		}
		get := orNew(assuming(r, assumed))
		view := merge.View(r, resource, merge.Resolve(r.Policy(), namespace, get), func(ns string) []merge.Item {
			if ns == namespace {
				return nil
			}
			// And its candidates, as the mirror's Inherited merges them:
			// an assumed stage may make one stand in.
			return sourceAndCandidates(r, resource, ns, name)
		})
		for _, rs := range view {
			if rs.Item.Name == name {
				res, found = rs, true
				return
			}
		}
	})
	return res, found, err
}

// orNew returns get, which takes a namespace it does not hold as one just
// created with no labels.
func orNew(get merge.NamespaceGetter) merge.NamespaceGetter {
	return func(name string) (*merge.Namespace, bool) {
		if ns, ok := get(name); ok {
			return ns, true
		}
		return &merge.Namespace{Name: name}, true
	}
}

// sourceAndCandidates are namespace ns's source name of resource and the
// candidates for it: what a level holds for one name when stages count.
func sourceAndCandidates(r watchmux.Reader, resource, ns, name string) []merge.Item {
	var out []merge.Item
	if it, ok := r.Source(resource, ns, name); ok {
		out = append(out, it)
	}
	for _, it := range r.NameItems(resource, ns, name) {
		if it.Name != name {
			out = append(out, it)
		}
	}
	return out
}
