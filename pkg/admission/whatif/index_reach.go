package whatif

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// InheritedReach answers the guards: how many namespaces other than the
// source's own would see their view of resource change if the source
// namespace/name became obj (nil: deleted): watchmux.Reach, the one
// definition of a reach, which previews and kubectl implicit count too.
func (x *Index) InheritedReach(resource, namespace, name string, obj runtime.Object) (int, error) {
	e := watchmux.Edit{Namespace: namespace, Name: name}
	if obj != nil {
		acc, err := meta.Accessor(obj)
		if err != nil {
			return 0, fmt.Errorf("reach of %s %s/%s: %w", resource, namespace, name, err)
		}
		ann := acc.GetAnnotations()
		e.Item = &merge.Item{Namespace: namespace, Name: name, Locked: merge.IsLocked(ann), Exceptions: merge.ExceptionRulesOf(ann), Overlay: merge.WantsOverlay(ann), Object: obj}
	}
	n := 0
	err := x.read(func(r watchmux.Reader) {
		if !isServed(r, resource) {
			return
		}
		n = len(watchmux.Reach(r, resource, e))
	})
	return n, err
}

// DeletionLosers answers the guards: the namespaces, sorted, whose views hold
// an item (its source or an overlay) of namespace or of one of its
// ancestors (for a global namespace: of itself), which deleting namespace
// takes away: its children lose their parent, and inherit none of the
// lineage above it.
func (x *Index) DeletionLosers(namespace string) (out []string, err error) {
	err = x.read(func(r watchmux.Reader) {
		if _, ok := r.Namespace(namespace); !ok {
			return
		}
		from := map[string]bool{namespace: true}
		viewers := r.Namespaces()
		if !slices.Contains(r.GlobalNamespaces(), namespace) {
			for _, a := range r.Lineage(namespace).Ancestors {
				from[a.Name] = true
			}
			viewers = subtreeAssuming(r, namespace, nil)
		}
		for _, viewer := range viewers {
			if viewer != namespace && losesFrom(r, viewer, from) {
				out = append(out, viewer)
			}
		}
	})
	slices.Sort(out)
	return out, err
}

// losesFrom reports whether viewer's views hold an item whose source or an
// overlay is of a namespace of from.
func losesFrom(r watchmux.Reader, viewer string, from map[string]bool) bool {
	for _, res := range r.Resources() {
		if !r.Serves(res) {
			continue
		}
		for _, item := range r.Results(res, viewer, "") {
			if item.Item.Namespace != viewer && from[item.Item.Namespace] {
				return true
			}
			for _, o := range item.Overlays {
				if o.Namespace != viewer && from[o.Namespace] {
					return true
				}
			}
		}
	}
	return false
}
