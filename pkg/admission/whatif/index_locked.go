package whatif

import (
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// LockedLoss answers the guards: the locked inherited items that would leave
// the view of namespace or of a namespace below it if namespace's labels
// and annotations became next, sorted by resource, namespace and name. An
// item is lost by a view that shows it inherited (the winning source, or a
// locked overlay, from another namespace) before the change and not after
// it. Both are computed with assumed applied. A namespace that does not
// exist loses nothing: its creation takes nothing from anyone.
func (x *Index) LockedLoss(namespace string, next NamespaceMeta, assumed Assumed) (out []LockedItem, err error) {
	return x.LockedLossPending(namespace, next, assumed, Pending{})
}

// LockedLossPending answers the guards: LockedLoss with the source writes
// pending applied (sources admitted locked count as locked).
func (x *Index) LockedLossPending(namespace string, next NamespaceMeta, assumed Assumed, pending Pending) (out []LockedItem, err error) {
	err = x.read(func(r watchmux.Reader) { out = lockedLoss(pending.over(r), namespace, next, assumed) })
	return out, err
}

func lockedLoss(r watchmux.Reader, namespace string, next NamespaceMeta, assumed Assumed) []LockedItem {
	before := assuming(r, assumed)
	cur, ok := before(namespace)
	if !ok {
		return nil
	}
	changed := *cur
	changed.Labels, changed.Annotations = next.Labels, next.Annotations
	after := func(name string) (*merge.Namespace, bool) {
		if name == namespace {
			return &changed, true
		}
		return before(name)
	}
	// Namespaces below namespace name it through their own labels, which
	// the change leaves as they are: the subtree is the same after it.
	subtree := subtreeAssuming(r, namespace, assumed)
	lost := lockedLost(r, subtree, before, func(res, viewer, name string) []merge.Result {
		return viewAssuming(r, res, viewer, name, after)
	})
	return sortedLocked(lost)
}

// lockedKey identifies a locked source item of a resource; overlay is set
// when the item is merged onto another rather than winning its name.
type lockedKey struct {
	resource, namespace, name string
	overlay                   bool
}

// lockedItems returns the locked items of a namespace's view: the winners
// and the overlays, the namespace's own included (its own locked object is
// lost too when an inherited locked item of its name displaces it). A
// winner that becomes an overlay is lost as a winner: the locked item
// above it takes the fields both set.
func lockedItems(resource string, view []merge.Result) sets.Set[lockedKey] {
	out := sets.New[lockedKey]()
	for _, r := range view {
		if r.Item.Locked {
			out.Insert(lockedKey{resource: resource, namespace: r.Item.Namespace, name: r.Item.Name})
		}
		for _, o := range r.Overlays {
			if o.Locked {
				out.Insert(lockedKey{resource: resource, namespace: o.Namespace, name: o.Name, overlay: true})
			}
		}
	}
	return out
}

// assuming returns the namespaces of the mirror with assumed applied.
// LockedStandIns answers the guards: for each of resources, the locked items
// that namespace or a namespace below it would newly inherit, if
// namespace's labels and annotations became next, while holding an object
// of its own under the item's name. Viewers are the namespaces holding one.
// For a materialized kind that object, not the locked item, is the real
// object engines enforce there: the change would let a lock be stood in for
// from below. Computed with assumed applied.
func (x *Index) LockedStandIns(namespace string, next NamespaceMeta, assumed Assumed, resources []string, pending Pending) (out []LockedItem, err error) {
	err = x.read(func(mirror watchmux.Reader) {
		r := pending.over(mirror)
		before := assuming(r, assumed)
		cur, ok := before(namespace)
		if !ok {
			return
		}
		changed := *cur
		changed.Labels, changed.Annotations = next.Labels, next.Annotations
		after := func(name string) (*merge.Namespace, bool) {
			if name == namespace {
				return &changed, true
			}
			return before(name)
		}
		// The subtree as it is after the change: the namespaces that name
		// namespace through their own labels stay below it.
		subtree := subtreeAssuming(r, namespace, assumed)
		found := map[lockedKey]sets.Set[string]{}
		for _, res := range resources {
			if !r.Serves(res) {
				continue
			}
			for _, viewer := range subtree {
				// Every name the viewer holds an object of: a locked
				// candidate stands in under its stable name where the
				// viewer's stage matches its selector.
				for _, name := range ownNames(r, pending, res, viewer) {
					addMissing(found, viewer, lockedItems(res, viewStaged(r, res, viewer, name, after)),
						lockedItems(res, viewStaged(r, res, viewer, name, before)))
				}
			}
		}
		out = sortedLocked(found)
	})
	return out, err
}

// addMissing records viewer for every item of from that minus lacks.
func addMissing(into map[lockedKey]sets.Set[string], viewer string, from, minus sets.Set[lockedKey]) {
	for it := range from {
		if minus.Has(it) {
			continue
		}
		if into[it] == nil {
			into[it] = sets.New[string]()
		}
		into[it].Insert(viewer)
	}
}

// sortedLocked lists items by resource, namespace and name.
func sortedLocked(items map[lockedKey]sets.Set[string]) []LockedItem {
	// An item lost as a winner in one view and as an overlay in another
	// is one item.
	merged := map[lockedKey]sets.Set[string]{}
	for k, viewers := range items {
		k.overlay = false
		if merged[k] == nil {
			merged[k] = sets.New[string]()
		}
		merged[k].Insert(viewers.UnsortedList()...)
	}
	out := make([]LockedItem, 0, len(merged))
	for k, viewers := range merged {
		out = append(out, LockedItem{Resource: k.resource, Namespace: k.namespace, Name: k.name, Viewers: sets.List(viewers)})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Resource != b.Resource {
			return a.Resource < b.Resource
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out
}

// DeletionLoss answers the guards: the locked items that would leave the
// views of other namespaces if namespace were deleted, with its sources:
// those it holds, and, for its subtree, those it and its ancestors pass
// down (a child whose parent is gone inherits from neither). Computed with
// assumed applied.
func (x *Index) DeletionLoss(namespace string, assumed Assumed) (out []LockedItem, err error) {
	err = x.read(func(r watchmux.Reader) {
		before := assuming(r, assumed)
		if _, ok := before(namespace); !ok {
			return
		}
		after := func(name string) (*merge.Namespace, bool) {
			if name == namespace {
				return nil, false
			}
			return before(name)
		}
		viewers := subtreeAssuming(r, namespace, assumed)[1:]
		if slices.Contains(r.GlobalNamespaces(), namespace) {
			viewers = r.Namespaces()
		}
		viewers = slices.DeleteFunc(slices.Clone(viewers), func(v string) bool { return v == namespace })
		out = sortedLocked(lockedLost(r, viewers, before, func(res, viewer, name string) []merge.Result {
			return viewWithout(r, res, viewer, name, after, namespace)
		}))
	})
	return out, err
}

// lockedLost returns, for every locked name of every served resource, the
// locked items of the viewers' views (as before gets the namespaces) that
// are not in them after (as after merges them), with the viewers losing
// each. Only names with a locked source can lose a locked item; merging one
// name at a time keeps this proportional to the locks.
func lockedLost(r watchmux.Reader, viewers []string, before merge.NamespaceGetter, after func(resource, viewer, name string) []merge.Result) map[lockedKey]sets.Set[string] {
	lost := map[lockedKey]sets.Set[string]{}
	for _, res := range r.Resources() {
		if !r.Serves(res) {
			continue
		}
		for _, name := range r.LockedNames(res) {
			for _, viewer := range viewers {
				addMissing(lost, viewer, lockedItems(res, viewAssuming(r, res, viewer, name, before)), lockedItems(res, after(res, viewer, name)))
			}
		}
	}
	return lost
}

// viewWithout is viewAssuming without the sources of the namespace gone.
func viewWithout(r watchmux.Reader, resource, namespace, name string, get merge.NamespaceGetter, gone string) []merge.Result {
	return merge.View(r, resource, merge.Resolve(r.Policy(), namespace, get), func(ns string) []merge.Item {
		if ns == gone {
			return nil
		}
		if it, ok := r.Source(resource, ns, name); ok {
			return []merge.Item{it}
		}
		return nil
	})
}

// reachedAssuming are the namespaces a source of namespace reaches, and
// their lineages, with assumed applied: a namespace assumed below namespace
// (moved there a moment ago) is reached too, and each inherits through its
// assumed lineage; one assumed gone has no view. Without assumptions, the
// mirror's.
func reachedAssuming(r watchmux.Reader, resource, namespace string, assumed Assumed) ([]string, func(string) merge.Lineage) {
	viewers := r.Reached(resource, namespace)
	if len(assumed) == 0 {
		return viewers, r.Lineage
	}
	get := assuming(r, assumed)
	for _, v := range subtreeAssuming(r, namespace, assumed) {
		if !slices.Contains(viewers, v) {
			viewers = append(viewers, v)
		}
	}
	viewers = slices.DeleteFunc(slices.Clone(viewers), func(v string) bool { _, ok := get(v); return !ok })
	return viewers, func(v string) merge.Lineage { return merge.Resolve(r.Policy(), v, get) }
}

// ObjectsUnderLock answers the guards: the namespaces that would inherit the
// source namespace/name locked, as obj, while holding an object of their
// own under that name (in the mirror, or among holders), sorted. Computed
// with assumed applied.
func (x *Index) ObjectsUnderLock(resource, namespace, name string, obj *unstructured.Unstructured, assumed Assumed, holders []string) (out []string, err error) {
	item := merge.Item{Namespace: namespace, Name: name, Object: obj, UID: obj.GetUID(), Locked: true, Overlay: merge.WantsOverlay(obj.GetAnnotations()), Exceptions: merge.ExceptionRulesOf(obj.GetAnnotations())}
	err = x.read(func(r watchmux.Reader) {
		if !isServed(r, resource) {
			return
		}
		viewers, lineage := reachedAssuming(r, resource, namespace, assumed)
		for _, viewer := range viewers {
			if viewer == namespace {
				continue
			}
			_, own := r.Source(resource, viewer, name)
			if (own || slices.Contains(holders, viewer)) && inheritsThrough(r, resource, lineage(viewer), namespace, item) {
				out = append(out, viewer)
			}
		}
	})
	slices.Sort(out)
	return out, err
}

// LockedUnderLock answers the guards: the locked sources of other namespaces
// under name that the source namespace/name, locked as obj, would displace
// from the views they win (they become overlays of it, or leave): each
// owner's lock would be overridden from above. Computed with assumed and
// pending applied: a namespace assumed below namespace (moved there a moment
// ago) is reached, and every viewer inherits through its assumed lineage.
func (x *Index) LockedUnderLock(resource, namespace, name string, obj *unstructured.Unstructured, assumed Assumed, pending Pending) (out []LockedItem, err error) {
	item := merge.Item{Namespace: namespace, Name: name, Object: obj, UID: obj.GetUID(), Locked: true, Overlay: merge.WantsOverlay(obj.GetAnnotations()), Exceptions: merge.ExceptionRulesOf(obj.GetAnnotations())}
	err = x.read(func(mirror watchmux.Reader) {
		r := pending.over(mirror)
		if !isServed(r, resource) {
			return
		}
		viewers, lineage := reachedAssuming(r, resource, namespace, assumed)
		lost := map[lockedKey]sets.Set[string]{}
		for _, viewer := range viewers {
			if viewer == namespace {
				continue
			}
			get := func(ns string) []merge.Item {
				if it, ok := r.Source(resource, ns, name); ok {
					return []merge.Item{it}
				}
				return nil
			}
			before := merge.View(r, resource, lineage(viewer), get)
			after := merge.View(r, resource, lineage(viewer), func(ns string) []merge.Item {
				if ns == namespace {
					return []merge.Item{item}
				}
				return get(ns)
			})
			was := lockedItems(resource, before)
			for it := range was {
				if it.namespace == namespace {
					was.Delete(it) // the lock being set is no loss
				}
			}
			addMissing(lost, viewer, was, lockedItems(resource, after))
		}
		out = sortedLocked(lost)
	})
	return out, err
}
