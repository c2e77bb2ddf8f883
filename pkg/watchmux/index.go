package watchmux

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// The admission guards (pkg/admission) ask the mirror what a change would do.
// Each query takes the read lock once.

// Reach returns how many namespaces' views of resource would change if the
// source namespace/name became obj (nil: deleted).
func (m *Mux) Reach(resource, namespace, name string, obj runtime.Object) (int, error) {
	o := &override{namespace: namespace, name: name}
	if obj != nil {
		acc, err := meta.Accessor(obj)
		if err != nil {
			return 0, fmt.Errorf("reach of %s %s/%s: %w", resource, namespace, name, err)
		}
		o.item = &merge.Item{Namespace: namespace, Name: name, Locked: merge.IsLocked(acc.GetAnnotations()), Object: obj}
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.synced {
		return 0, errNotSynced
	}
	if _, ok := m.st.sources[resource]; !ok {
		return 0, nil
	}
	n := 0
	for _, ns := range m.st.affected(resource, namespace) {
		before := m.st.results(resource, ns, name)
		after := m.st.resultsWith(resource, ns, name, o)
		if len(diff(resource, ns, before, after)) > 0 {
			n++
		}
	}
	return n, nil
}

// Inherited returns the item of name that namespace's view would show if
// namespace had no object of that name itself: the nearest inherited one.
func (m *Mux) Inherited(resource, namespace, name string) (merge.Result, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.synced {
		return merge.Result{}, false, errNotSynced
	}
	if _, ok := m.st.sources[resource]; !ok {
		return merge.Result{}, false, nil
	}
	res := m.st.resultsWith(resource, namespace, name, &override{namespace: namespace, name: name})
	if len(res) == 0 {
		return merge.Result{}, false, nil
	}
	return res[0], true, nil
}

// Overlays reports whether an object of resource with annotations, created
// below the inherited item inherited, would be merged onto it as an overlay
// rather than shadow it.
func (m *Mux) Overlays(resource string, inherited merge.Result, annotations map[string]string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.options[resource].Overlays(inherited, merge.Item{Overlay: merge.WantsOverlay(annotations)})
}

// HasDescendants reports whether some namespace names namespace as its parent.
func (m *Mux) HasDescendants(namespace string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.children[namespace].Len() > 0
}

// IsTenant reports whether namespace exists and is a tenant.
func (m *Mux) IsTenant(namespace string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ns, ok := m.st.namespaces[namespace]
	return ok && m.st.policy.IsTenant(ns)
}

// ParentCycle returns the cycle that setting namespace's parent label to
// parent would close, namespace first, or nil.
func (m *Mux) ParentCycle(namespace, parent string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	path := []string{namespace}
	seen := map[string]bool{namespace: true}
	for cur := parent; cur != ""; {
		path = append(path, cur)
		if cur == namespace {
			return path
		}
		if seen[cur] {
			return nil // a cycle above, not through namespace
		}
		seen[cur] = true
		ns, ok := m.st.namespaces[cur]
		if !ok {
			return nil
		}
		cur = ns.Labels[merge.LabelParent]
	}
	return nil
}

// Guarded is what the admission webhook's match conditions need to know,
// so that only requests the guards may act on are sent to them.
type Guarded struct {
	// LockedNames are the names of locked source objects, per resource, sorted.
	LockedNames map[string][]string
	// Inherited are the namespaces whose sources other namespaces inherit:
	// the global namespace and every namespace named as a parent, sorted.
	Inherited []string
}

// Guarded returns what the match conditions need, and false before sync.
func (m *Mux) Guarded() (Guarded, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.synced {
		return Guarded{}, false
	}
	g := Guarded{LockedNames: map[string][]string{}}
	for _, r := range m.st.resources {
		names := map[string]bool{}
		for _, byName := range m.st.sources[r] {
			for name, it := range byName {
				if it.Locked {
					names[name] = true
				}
			}
		}
		for n := range names {
			g.LockedNames[r] = append(g.LockedNames[r], n)
		}
		sort.Strings(g.LockedNames[r])
	}
	globals := m.st.globalNamespaces()
	g.Inherited = append(g.Inherited, globals...)
	for parent, kids := range m.st.children {
		if kids.Len() > 0 && !slices.Contains(globals, parent) {
			g.Inherited = append(g.Inherited, parent)
		}
	}
	sort.Strings(g.Inherited)
	return g, true
}

// String prints g compactly, for logs.
func (g Guarded) String() string {
	var b strings.Builder
	for _, r := range slices.Sorted(maps.Keys(g.LockedNames)) {
		fmt.Fprintf(&b, "%s locked %d; ", r, len(g.LockedNames[r]))
	}
	fmt.Fprintf(&b, "%d inherited namespaces", len(g.Inherited))
	return b.String()
}

// Exists reports whether namespace exists.
func (m *Mux) Exists(namespace string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.st.namespaces[namespace]
	return ok
}

// Terminating reports whether namespace is being deleted.
func (m *Mux) Terminating(namespace string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.st.terminating.Has(namespace)
}

// LineageGeneration returns a key that changes whenever a view of
// namespace, of one of its ancestors or of the global namespace changes, or
// its ancestors change: a decision computed from those views (pkg/authz)
// stays valid while the key is the same.
func (m *Mux) LineageGeneration(namespace string) (string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.synced {
		return "", errNotSynced
	}
	l := m.st.lineage(namespace)
	var b strings.Builder
	// The instance id keeps keys of different instances apart.
	fmt.Fprintf(&b, "%d/%s=%d", m.v.instance, namespace, m.st.generations[namespace])
	for _, g := range m.st.globalNamespaces() {
		fmt.Fprintf(&b, "/%s=%d", g, m.st.generations[g])
	}
	for _, a := range l.Ancestors {
		fmt.Fprintf(&b, "/%s=%d", a.Name, m.st.generations[a.Name])
	}
	return b.String(), nil
}
