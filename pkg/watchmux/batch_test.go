package watchmux_test

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// TestGlobalEditResumes checks the events of one global edit as watchers
// resume from every version around it. The tenants that see the global
// item alike get their events together (a batch), each with its own
// version; a tenant that shadows the item gets none. A watcher of every
// namespace resumed from any version in between gets exactly the events
// after it, and a watcher of one namespace its own event, at the version
// the watcher of every namespace saw it.
func TestGlobalEditResumes(t *testing.T) {
	t.Parallel()
	m := newMux(watchmux.Options{})
	for _, ns := range []string{global, "a", "b", "c", "d", "e"} {
		addNS(namespace(ns))(m)
	}
	putRB("c", "g1")(m) // shadows the global item
	m.MarkSynced()
	before := currentRV(t, m)
	putRB(global, "g1")(m)
	after := currentRV(t, m)
	want := []string{
		"ADDED implicit-global/g1 local@implicit-global",
		"ADDED a/g1 global@implicit-global",
		"ADDED b/g1 global@implicit-global",
		"ADDED d/g1 global@implicit-global",
		"ADDED e/g1 global@implicit-global",
	}
	if int(after-before) != len(want) {
		t.Fatalf("the edit took %d versions, want one per view event (%d)", after-before, len(want))
	}
	seen := map[string]uint64{} // namespace -> version of its event
	for from := before; from <= after; from++ {
		f := watchAndFollow(t, m, watchmux.WatchOptions{ResourceVersion: rvText(from)})
		got := f.waitFor(t, int(after-from))
		for i, ev := range got {
			if rv := rvOf(t, ev); rv != from+uint64(i)+1 {
				t.Errorf("resumed from %d: event %d (%s) has version %d, want %d", from, i, describeEvent(ev), rv, from+uint64(i)+1)
			}
		}
		if from == before {
			if g := describeEvents(got); !slices.Equal(g, sorted(want)) {
				t.Fatalf("events:\n got %q\nwant %q", g, sorted(want))
			}
			for _, ev := range got {
				seen[namespaceOf(t, ev)] = rvOf(t, ev)
			}
		}
	}
	for _, ns := range []string{"a", "b", "d", "e"} {
		f := watchAndFollow(t, m, watchmux.WatchOptions{Namespace: ns, ResourceVersion: rvText(before)})
		got := f.waitFor(t, 1)
		if rv := rvOf(t, got[0]); describeEvent(got[0]) != "ADDED "+ns+"/g1 global@implicit-global" || rv != seen[ns] {
			t.Errorf("%s: got %s at %d, want its ADDED at %d", ns, describeEvent(got[0]), rv, seen[ns])
		}
		// Resumed from its own event's version, it gets nothing more of it.
		f = watchAndFollow(t, m, watchmux.WatchOptions{Namespace: ns, ResourceVersion: rvText(seen[ns])})
		putRB(ns, "marker")(m)
		if got := f.waitFor(t, 1); describeEvent(got[0]) != "ADDED "+ns+"/marker local@"+ns {
			t.Errorf("%s resumed after its event: got %s first, want the marker", ns, describeEvent(got[0]))
		}
	}
	// The shadowing tenant's watcher gets nothing of the edit.
	f := watchAndFollow(t, m, watchmux.WatchOptions{Namespace: "c", ResourceVersion: rvText(before)})
	putRB("c", "marker")(m)
	if got := f.waitFor(t, 1); describeEvent(got[0]) != "ADDED c/marker local@c" {
		t.Errorf("c: got %s first, want the marker", describeEvent(got[0]))
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func namespaceOf(t testing.TB, ev watch.Event) string {
	t.Helper()
	acc, err := meta.Accessor(ev.Object)
	if err != nil {
		t.Fatal(err)
	}
	return acc.GetNamespace()
}
