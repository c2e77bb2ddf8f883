package watchmux

import (
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// Merging the mirror's views: a namespace's view of a resource, or one item
// of it, as it is or as an edit would leave it. Callers hold Mux.mu (read).

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
		excludes := merge.DeclaresExclusions(a.Annotations)
		if has || staged || excludes || (o != nil && o.namespace == a.Name) {
			kept = append(kept, a)
		}
	}
	l.Ancestors = kept
	return l
}
