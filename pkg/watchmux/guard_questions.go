package watchmux

import (
	"sort"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// The hierarchy guard (pkg/admission) asks what a change of one namespace's
// labels and annotations would do to the views, assuming changes it has
// admitted that the mirror may not show yet. Each query takes the read lock
// once and changes nothing.

// NamespaceMeta is what a namespace change sets of the labels and
// annotations merging reads: the parent label, the inherit label, the
// recorded parent uid, the exclusions.
type NamespaceMeta struct {
	Labels      map[string]string
	Annotations map[string]string
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

// LockedLoss returns the locked inherited items that would leave the view
// of namespace or of a namespace below it if namespace's labels and
// annotations became next, sorted by resource, namespace and name. An item
// is lost by a view that shows it inherited (the winning source, or a
// locked overlay, from another namespace) before the change and not after
// it. Both are computed with assumed applied. A namespace that does not
// exist loses nothing: its creation takes nothing from anyone.
func (m *Mux) LockedLoss(namespace string, next NamespaceMeta, assumed Assumed) ([]LockedItem, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.synced {
		return nil, errNotSynced
	}
	before := m.st.assumingLocked(assumed)
	cur, ok := before(namespace)
	if !ok {
		return nil, nil
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
	subtree := m.st.subtreeAssumingLocked(namespace, assumed)
	lost := map[lockedKey]sets.Set[string]{}
	for _, r := range m.st.resources {
		if m.st.pending.Has(r) {
			continue
		}
		// Only names with a locked source can lose a locked item; merging
		// one name at a time keeps this proportional to the locks.
		for _, name := range m.st.lockedNamesLocked(r) {
			for _, viewer := range subtree {
				kept := lockedInherited(r, viewer, m.st.viewAssumingLocked(r, viewer, name, after))
				for it := range lockedInherited(r, viewer, m.st.viewAssumingLocked(r, viewer, name, before)) {
					if kept.Has(it) {
						continue
					}
					if lost[it] == nil {
						lost[it] = sets.New[string]()
					}
					lost[it].Insert(viewer)
				}
			}
		}
	}
	out := make([]LockedItem, 0, len(lost))
	for k, viewers := range lost {
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
	return out, nil
}

// ParentCycleAssuming is ParentCycle with assumed applied: the cycle that
// setting namespace's parent label to parent would close, namespace first,
// or nil.
func (m *Mux) ParentCycleAssuming(namespace, parent string, assumed Assumed) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	get := m.st.assumingLocked(assumed)
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
		cur = ns.Labels[merge.LabelParent]
	}
	return nil
}

// SourceLocked reports whether the source object namespace/name of
// resource is locked: what a request that carries no annotations of its
// own (a scale subresource) is judged by.
func (m *Mux) SourceLocked(resource, namespace, name string) (bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.synced {
		return false, errNotSynced
	}
	it, ok := m.st.sources[resource][namespace][name]
	return ok && it.Locked, nil
}

// lockedKey identifies a locked source item of a resource.
type lockedKey struct{ resource, namespace, name string }

// lockedInherited returns the locked items of view that come from another
// namespace than viewer: the winners and the overlays.
func lockedInherited(resource, viewer string, view []merge.Result) sets.Set[lockedKey] {
	out := sets.New[lockedKey]()
	for _, r := range view {
		if r.Item.Locked && r.Item.Namespace != viewer {
			out.Insert(lockedKey{resource, r.Item.Namespace, r.Item.Name})
		}
		for _, o := range r.Overlays {
			if o.Locked && o.Namespace != viewer {
				out.Insert(lockedKey{resource, o.Namespace, o.Name})
			}
		}
	}
	return out
}

// assumingLocked returns the namespaces of the mirror with assumed applied.
func (s *state) assumingLocked(assumed Assumed) merge.NamespaceGetter {
	return func(name string) (*merge.Namespace, bool) {
		ns, ok := s.namespaces[name]
		a, isAssumed := assumed[name]
		switch {
		case !isAssumed:
			return ns, ok
		case !ok:
			return &merge.Namespace{Name: name, Labels: a.Labels, Annotations: a.Annotations}, true
		}
		c := *ns
		c.Labels, c.Annotations = a.Labels, a.Annotations
		return &c, true
	}
}

// subtreeAssumingLocked is subtree with assumed applied: name and every
// namespace that names it as an ancestor, each once.
func (s *state) subtreeAssumingLocked(name string, assumed Assumed) []string {
	get := s.assumingLocked(assumed)
	extra := map[string][]string{}
	for child, a := range assumed {
		if p := a.Labels[merge.LabelParent]; p != "" {
			extra[p] = append(extra[p], child)
		}
	}
	out := []string{name}
	seen := sets.New(name)
	for i := 0; i < len(out); i++ {
		cur := out[i]
		candidates := append(sets.List(s.children[cur]), extra[cur]...)
		sort.Strings(candidates)
		for _, child := range candidates {
			ns, ok := get(child)
			if seen.Has(child) || !ok || ns.Labels[merge.LabelParent] != cur {
				continue
			}
			seen.Insert(child)
			out = append(out, child)
		}
	}
	return out
}

// viewAssumingLocked merges the item name of namespace's view of resource,
// with the namespaces get returns.
func (s *state) viewAssumingLocked(resource, namespace, name string, get merge.NamespaceGetter) []merge.Result {
	lineage := merge.Resolve(s.policy, namespace, get)
	levels := merge.Levels(lineage, s.globalFor(resource), func(ns string) []merge.Item {
		if it, ok := s.sources[resource][ns][name]; ok {
			return []merge.Item{it}
		}
		return nil
	})
	return merge.MergeWith(resource, levels, s.options[resource])
}

// lockedNamesLocked returns the names of resource's locked sources, sorted.
func (s *state) lockedNamesLocked(resource string) []string {
	names := sets.New[string]()
	for _, byName := range s.sources[resource] {
		for name, it := range byName {
			if it.Locked {
				names.Insert(name)
			}
		}
	}
	return sets.List(names)
}
