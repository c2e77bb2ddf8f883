package whatif

import (
	"maps"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// InheritedItems answers the exceptions guard: the items of resource that
// namespace, with next's labels, inherits as if no namespace of its lineage
// excluded anything (their exclusion annotations, exceptions, approvals
// and expiry marks taken away). An exception is judged on what it names
// by itself: whatever else excludes those items now may stop excluding
// them later (an exclusion removed, another exception ending), and the
// exception would then be the one that holds. A namespace the mirror does
// not hold yet is taken as just created with next's labels.
func (x *Index) InheritedItems(resource, namespace string, next NamespaceMeta) (out []merge.Result, err error) {
	err = x.read(func(r watchmux.Reader) {
		if !isServed(r, resource) {
			return
		}
		get := unexcluded(orNew(assuming(r, Assumed{namespace: next})))
		out = merge.View(r, resource, merge.Resolve(r.Policy(), namespace, get), func(ns string) []merge.Item {
			if ns == namespace {
				return nil
			}
			return r.SourcesIn(resource, ns)
		})
	})
	return out, err
}

// unexcluded returns get with every namespace's exclusion annotations
// (merge.ExclusionAnnotations) taken away.
func unexcluded(get merge.NamespaceGetter) merge.NamespaceGetter {
	return func(name string) (*merge.Namespace, bool) {
		ns, ok := get(name)
		if !ok || !merge.DeclaresExclusions(ns.Annotations) {
			return ns, ok
		}
		c := *ns
		c.Annotations = maps.Clone(ns.Annotations)
		for _, k := range merge.ExclusionAnnotations {
			delete(c.Annotations, k)
		}
		return &c, true
	}
}
