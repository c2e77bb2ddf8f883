package watchmux

import (
	"slices"
	"testing"
)

// TestWatcherIndex checks the namespace index of the watchers through
// adds and removals in any order: each namespace lists exactly its open
// watchers, each at its slot, and a namespace without one is dropped.
func TestWatcherIndex(t *testing.T) {
	m := &Mux{watchers: map[*watcher]struct{}{}, allNamespaces: map[*watcher]struct{}{},
		byNamespace: map[string][]*watcher{}, connections: map[string]*connectionGroup{}}
	open := map[*watcher]bool{}
	var all []*watcher
	for i := range 12 {
		w := &watcher{opts: WatchOptions{Namespace: []string{"a", "b", ""}[i%3]}}
		m.addWatcherLocked(w)
		all = append(all, w)
		open[w] = true
	}
	check := func(when string) {
		t.Helper()
		for ns, ws := range m.byNamespace {
			if len(ws) == 0 {
				t.Errorf("%s: namespace %q is indexed with no watcher", when, ns)
			}
			for i, w := range ws {
				if w.slot != i || w.opts.Namespace != ns || !open[w] {
					t.Errorf("%s: %q[%d] is a watcher of %q at slot %d (open %v)", when, ns, i, w.opts.Namespace, w.slot, open[w])
				}
			}
		}
		for _, w := range all {
			indexed := slices.Contains(m.byNamespace[w.opts.Namespace], w)
			if _, ok := m.allNamespaces[w]; ok {
				indexed = true
			}
			if indexed != open[w] {
				t.Errorf("%s: watcher of %q indexed %v, open %v", when, w.opts.Namespace, indexed, open[w])
			}
		}
	}
	check("after adding")
	for _, i := range []int{4, 0, 10, 7, 1, 2, 5, 3, 11, 6, 9, 8} {
		m.removeWatcherLocked(all[i])
		open[all[i]] = false
		m.removeWatcherLocked(all[i]) // a second removal changes nothing
		check("after removing watcher " + string(rune('0'+i%10)))
	}
	if len(m.byNamespace) != 0 || len(m.allNamespaces) != 0 || len(m.watchers) != 0 {
		t.Errorf("after removing every watcher: %d namespaces, %d every-namespace watchers, %d watchers indexed", len(m.byNamespace), len(m.allNamespaces), len(m.watchers))
	}
}
