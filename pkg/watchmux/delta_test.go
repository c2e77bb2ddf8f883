package watchmux_test

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// hierarchy is the cluster most cases start from:
//
//	implicit-global   the global namespace (not a tenant)
//	kube-system       excluded (not a tenant)
//	legacy            labeled implicit.dev/inherit: "false" (not a tenant)
//	org               a root tenant
//	├── team-a
//	│   └── team-a-1
//	└── team-b
//	solo              a root tenant
func hierarchy() []step {
	return []step{
		addNS(namespace(global)),
		addNS(namespace("kube-system")),
		addNS(namespace("legacy", noInherit)),
		addNS(namespace("org")),
		addNS(namespace("team-a", parent("org"))),
		addNS(namespace("team-b", parent("org"))),
		addNS(namespace("team-a-1", parent("team-a"))),
		addNS(namespace("solo")),
	}
}

// with returns the hierarchy, then more.
func with(more ...step) []step { return append(hierarchy(), more...) }

// cycle is org-less namespaces c1 -> c2 (c1's parent is c2), c3 -> c1, with
// an item in each of c1 and c2.
func cycle(more ...step) []step {
	return append([]step{
		addNS(namespace(global)),
		addNS(namespace("c1", parent("c2"))),
		addNS(namespace("c2")),
		addNS(namespace("c3", parent("c1"))),
		putRB(global, "g1"),
		putRB("c1", "y"),
		putRB("c2", "x"),
	}, more...)
}

// TestViewEvents drives every kind of change of the merge rules through the
// public API and checks that each makes exactly the events of the views it
// changes: the setup is fed before the mux syncs (no events), the change
// after, seen by an all-namespaces watch resumed from the synced version.
func TestViewEvents(t *testing.T) {
	t.Parallel()
	same := roleBinding("org", "p1")
	tests := []struct {
		name   string
		setup  []step
		change []step
		want   []string
	}{
		// Global items: every tenant and the global namespace's own view.
		{
			name:   "global item added",
			setup:  hierarchy(),
			change: []step{putRB(global, "g1")},
			want: []string{
				"ADDED implicit-global/g1 local@implicit-global",
				"ADDED org/g1 global@implicit-global",
				"ADDED solo/g1 global@implicit-global",
				"ADDED team-a-1/g1 global@implicit-global",
				"ADDED team-a/g1 global@implicit-global",
				"ADDED team-b/g1 global@implicit-global",
			},
		},
		{
			name:   "global item updated",
			setup:  with(putRB(global, "g1")),
			change: []step{putRB(global, "g1")},
			want: []string{
				"MODIFIED implicit-global/g1 local@implicit-global",
				"MODIFIED org/g1 global@implicit-global",
				"MODIFIED solo/g1 global@implicit-global",
				"MODIFIED team-a-1/g1 global@implicit-global",
				"MODIFIED team-a/g1 global@implicit-global",
				"MODIFIED team-b/g1 global@implicit-global",
			},
		},
		{
			name:   "global item deleted",
			setup:  with(putRB(global, "g1")),
			change: []step{delRB(global, "g1")},
			want: []string{
				"DELETED implicit-global/g1 local@implicit-global",
				"DELETED org/g1 global@implicit-global",
				"DELETED solo/g1 global@implicit-global",
				"DELETED team-a-1/g1 global@implicit-global",
				"DELETED team-a/g1 global@implicit-global",
				"DELETED team-b/g1 global@implicit-global",
			},
		},
		{
			name:  "global item deleted, final state unknown",
			setup: with(putRB(global, "g1")),
			change: []step{func(m *watchmux.Mux) {
				m.OnSource(rolebindings, cache.DeletedFinalStateUnknown{Key: global + "/g1", Obj: roleBinding(global, "g1")}, false)
			}},
			want: []string{
				"DELETED implicit-global/g1 local@implicit-global",
				"DELETED org/g1 global@implicit-global",
				"DELETED solo/g1 global@implicit-global",
				"DELETED team-a-1/g1 global@implicit-global",
				"DELETED team-a/g1 global@implicit-global",
				"DELETED team-b/g1 global@implicit-global",
			},
		},
		{
			name:   "global item added, shadowed locally, by a parent and excluded",
			setup:  with(putRB("team-a", "g1"), addNS(namespace("team-b", parent("org"), exclude("rolebindings/g1")))),
			change: []step{putRB(global, "g1")},
			want: []string{
				"ADDED implicit-global/g1 local@implicit-global",
				"ADDED org/g1 global@implicit-global",
				"ADDED solo/g1 global@implicit-global",
			},
		},
		{
			name:   "global item updated, shadowed locally, by a parent and excluded",
			setup:  with(putRB(global, "g1"), putRB("team-a", "g1"), addNS(namespace("team-b", parent("org"), exclude("rolebindings/*")))),
			change: []step{putRB(global, "g1")},
			want: []string{
				"MODIFIED implicit-global/g1 local@implicit-global",
				"MODIFIED org/g1 global@implicit-global",
				"MODIFIED solo/g1 global@implicit-global",
			},
		},
		{
			name:   "global item deleted, shadowed locally, by a parent and excluded",
			setup:  with(putRB(global, "g1"), putRB("team-a", "g1"), addNS(namespace("team-b", parent("org"), exclude(" rolebindings / g1 ")))),
			change: []step{delRB(global, "g1")},
			want: []string{
				"DELETED implicit-global/g1 local@implicit-global",
				"DELETED org/g1 global@implicit-global",
				"DELETED solo/g1 global@implicit-global",
			},
		},
		{
			name:   "global item added, before the global namespace exists",
			setup:  hierarchy()[1:],
			change: []step{putRB(global, "g1")},
			want: []string{
				"ADDED org/g1 global@implicit-global",
				"ADDED solo/g1 global@implicit-global",
				"ADDED team-a-1/g1 global@implicit-global",
				"ADDED team-a/g1 global@implicit-global",
				"ADDED team-b/g1 global@implicit-global",
			},
		},
		{
			name:   "global namespace created",
			setup:  append(hierarchy()[1:], putRB(global, "g1")),
			change: []step{addNS(namespace(global))},
			want:   []string{"ADDED implicit-global/g1 local@implicit-global"},
		},
		// Parent items: the subtree, minus shadows and exclusions.
		{
			name:   "parent item added",
			setup:  hierarchy(),
			change: []step{putRB("org", "p1")},
			want: []string{
				"ADDED org/p1 local@org",
				"ADDED team-a-1/p1 parent@org",
				"ADDED team-a/p1 parent@org",
				"ADDED team-b/p1 parent@org",
			},
		},
		{
			name:   "parent item updated",
			setup:  with(putRB("org", "p1")),
			change: []step{putRB("org", "p1")},
			want: []string{
				"MODIFIED org/p1 local@org",
				"MODIFIED team-a-1/p1 parent@org",
				"MODIFIED team-a/p1 parent@org",
				"MODIFIED team-b/p1 parent@org",
			},
		},
		{
			name:   "parent item deleted",
			setup:  with(putRB("org", "p1")),
			change: []step{delRB("org", "p1")},
			want: []string{
				"DELETED org/p1 local@org",
				"DELETED team-a-1/p1 parent@org",
				"DELETED team-a/p1 parent@org",
				"DELETED team-b/p1 parent@org",
			},
		},
		{
			name:   "parent item added, shadowed by a nearer parent and excluded",
			setup:  with(putRB("team-a", "p1"), addNS(namespace("team-b", parent("org"), exclude("rolebindings/*")))),
			change: []step{putRB("org", "p1")},
			want:   []string{"ADDED org/p1 local@org"},
		},
		{
			name:   "parent item shadows a global item",
			setup:  with(putRB(global, "g1")),
			change: []step{putRB("team-a", "g1")},
			want: []string{
				"MODIFIED team-a-1/g1 parent@team-a",
				"MODIFIED team-a/g1 local@team-a",
			},
		},
		{
			name:   "parent item no longer shadows a global item",
			setup:  with(putRB(global, "g1"), putRB("team-a", "g1")),
			change: []step{delRB("team-a", "g1")},
			want: []string{
				"MODIFIED team-a-1/g1 global@implicit-global",
				"MODIFIED team-a/g1 global@implicit-global",
			},
		},
		// Local items: their own namespace only.
		{
			name:   "local item added",
			setup:  hierarchy(),
			change: []step{putRB("team-b", "l1")},
			want:   []string{"ADDED team-b/l1 local@team-b"},
		},
		{
			name:   "local item updated",
			setup:  with(putRB("team-a-1", "l1")),
			change: []step{putRB("team-a-1", "l1")},
			want:   []string{"MODIFIED team-a-1/l1 local@team-a-1"},
		},
		{
			name:   "local item deleted",
			setup:  with(putRB("team-a-1", "l1")),
			change: []step{delRB("team-a-1", "l1")},
			want:   []string{"DELETED team-a-1/l1 local@team-a-1"},
		},
		{
			name:   "local item shadows a global item",
			setup:  with(putRB(global, "g1")),
			change: []step{putRB("team-b", "g1")},
			want:   []string{"MODIFIED team-b/g1 local@team-b"},
		},
		{
			name:   "local item in a non-tenant",
			setup:  with(putRB(global, "g1")),
			change: []step{putRB("kube-system", "g1"), putRB("legacy", "l1")},
			want:   []string{"ADDED kube-system/g1 local@kube-system", "ADDED legacy/l1 local@legacy"},
		},
		{
			name:   "local item in a namespace that does not exist",
			setup:  hierarchy(),
			change: []step{putRB("ghost", "l1"), putRB("ghost", "l1"), delRB("ghost", "l1")},
		},
		{
			name:   "item of a child does not reach its parent or siblings",
			setup:  hierarchy(),
			change: []step{putRB("team-a", "t1")},
			want:   []string{"ADDED team-a-1/t1 parent@team-a", "ADDED team-a/t1 local@team-a"},
		},
		{
			name:   "same source object delivered again",
			setup:  with(put(rolebindings, same)),
			change: []step{put(rolebindings, same)},
		},
		// Re-parenting: what the subtree gains and loses.
		{
			name:   "namespace re-parented",
			setup:  with(putRB(global, "g1"), putRB("org", "p1"), putRB("org", "both"), putRB("solo", "s1"), putRB("solo", "both"), putRB("team-a", "t1")),
			change: []step{addNS(namespace("team-a", parent("solo")))},
			want: []string{
				"ADDED team-a-1/s1 parent@solo",
				"ADDED team-a/s1 parent@solo",
				"DELETED team-a-1/p1 parent@org",
				"DELETED team-a/p1 parent@org",
				"MODIFIED team-a-1/both parent@solo",
				"MODIFIED team-a/both parent@solo",
			},
		},
		{
			name:   "parent label removed",
			setup:  with(putRB(global, "g1"), putRB("org", "p1")),
			change: []step{addNS(namespace("team-a"))},
			want:   []string{"DELETED team-a-1/p1 parent@org", "DELETED team-a/p1 parent@org"},
		},
		{
			name:   "parent label names a missing namespace",
			setup:  with(putRB(global, "g1"), putRB("org", "p1")),
			change: []step{addNS(namespace("team-a", parent("ghost")))},
			want:   []string{"DELETED team-a-1/p1 parent@org", "DELETED team-a/p1 parent@org"},
		},
		{
			name:   "parent label names a non-tenant",
			setup:  with(putRB(global, "g1"), putRB("org", "p1"), putRB("legacy", "l1")),
			change: []step{addNS(namespace("team-a", parent("legacy")))},
			want:   []string{"DELETED team-a-1/p1 parent@org", "DELETED team-a/p1 parent@org"},
		},
		{
			name:   "parent label names the global namespace",
			setup:  with(putRB(global, "g1"), putRB("org", "p1")),
			change: []step{addNS(namespace("team-b", parent(global)))},
			want:   []string{"DELETED team-b/p1 parent@org"},
		},
		{
			name:   "namespace updated without a change that matters",
			setup:  with(putRB(global, "g1"), putRB("org", "p1")),
			change: []step{addNS(namespace("org", exclude("roles/*"))), addNS(namespace("team-a", parent("org"), exclude("networkpolicies/g1")))},
		},
		// Exclusions.
		{
			name:   "exclusion added on a parent",
			setup:  with(putRB(global, "g1"), putRB(global, "g2"), putRB("org", "p1")),
			change: []step{addNS(namespace("org", exclude("rolebindings/g1")))},
			want: []string{
				"DELETED org/g1 global@implicit-global",
				"DELETED team-a-1/g1 global@implicit-global",
				"DELETED team-a/g1 global@implicit-global",
				"DELETED team-b/g1 global@implicit-global",
			},
		},
		{
			name:   "exclusion removed from a parent",
			setup:  with(putRB(global, "g1"), putRB(global, "g2"), addNS(namespace("org", exclude("rolebindings/g1")))),
			change: []step{addNS(namespace("org"))},
			want: []string{
				"ADDED org/g1 global@implicit-global",
				"ADDED team-a-1/g1 global@implicit-global",
				"ADDED team-a/g1 global@implicit-global",
				"ADDED team-b/g1 global@implicit-global",
			},
		},
		{
			name:   "wildcard exclusion added on a child, keeping its own items",
			setup:  with(putRB(global, "g1"), putRB("org", "p1"), putRB("team-a", "t1")),
			change: []step{addNS(namespace("team-a", parent("org"), exclude("rolebindings/*")))},
			want: []string{
				"DELETED team-a-1/g1 global@implicit-global",
				"DELETED team-a-1/p1 parent@org",
				"DELETED team-a/g1 global@implicit-global",
				"DELETED team-a/p1 parent@org",
			},
		},
		{
			name:   "exclusion added on a leaf",
			setup:  with(putRB(global, "g1"), putRB("org", "p1")),
			change: []step{addNS(namespace("team-b", parent("org"), exclude("rolebindings/p1,rolebindings/nothing")))},
			want:   []string{"DELETED team-b/p1 parent@org"},
		},
		// Locks.
		{
			name:   "lock added on a global item shadowed locally",
			setup:  with(putRB(global, "g1"), putRB("team-b", "g1")),
			change: []step{putRB(global, "g1", locked)},
			want: []string{
				"MODIFIED implicit-global/g1 local@implicit-global",
				"MODIFIED org/g1 global@implicit-global",
				"MODIFIED solo/g1 global@implicit-global",
				"MODIFIED team-a-1/g1 global@implicit-global",
				"MODIFIED team-a/g1 global@implicit-global",
				"MODIFIED team-b/g1 global@implicit-global conflict",
			},
		},
		{
			name:   "lock removed from a global item shadowed locally",
			setup:  with(putRB(global, "g1", locked), putRB("team-b", "g1")),
			change: []step{putRB(global, "g1")},
			want: []string{
				"MODIFIED implicit-global/g1 local@implicit-global",
				"MODIFIED org/g1 global@implicit-global",
				"MODIFIED solo/g1 global@implicit-global",
				"MODIFIED team-a-1/g1 global@implicit-global",
				"MODIFIED team-a/g1 global@implicit-global",
				"MODIFIED team-b/g1 local@team-b",
			},
		},
		{
			name:   "lock added on a global item shadowed by a parent",
			setup:  with(putRB(global, "g1"), putRB("team-a", "g1")),
			change: []step{putRB(global, "g1", locked)},
			want: []string{
				"MODIFIED implicit-global/g1 local@implicit-global",
				"MODIFIED org/g1 global@implicit-global",
				"MODIFIED solo/g1 global@implicit-global",
				"MODIFIED team-a-1/g1 global@implicit-global conflict",
				"MODIFIED team-a/g1 global@implicit-global conflict",
				"MODIFIED team-b/g1 global@implicit-global",
			},
		},
		{
			name:   "lock added on an excluded global item",
			setup:  with(putRB(global, "g1"), addNS(namespace("org", exclude("rolebindings/g1")))),
			change: []step{putRB(global, "g1", locked)},
			want: []string{
				"ADDED org/g1 global@implicit-global conflict",
				"ADDED team-a-1/g1 global@implicit-global conflict",
				"ADDED team-a/g1 global@implicit-global conflict",
				"ADDED team-b/g1 global@implicit-global conflict",
				"MODIFIED implicit-global/g1 local@implicit-global",
				"MODIFIED solo/g1 global@implicit-global",
			},
		},
		{
			name:   "shadow of a locked item created",
			setup:  with(putRB(global, "g1", locked)),
			change: []step{putRB("team-b", "g1")},
			want:   []string{"MODIFIED team-b/g1 global@implicit-global conflict"},
		},
		{
			name:   "shadow of a locked item updated",
			setup:  with(putRB(global, "g1", locked), putRB("team-b", "g1")),
			change: []step{putRB("team-b", "g1")},
		},
		{
			name:   "shadow of a locked item deleted",
			setup:  with(putRB(global, "g1", locked), putRB("team-b", "g1")),
			change: []step{delRB("team-b", "g1")},
			want:   []string{"MODIFIED team-b/g1 global@implicit-global"},
		},
		{
			name:   "exclusion of a locked item added",
			setup:  with(putRB(global, "g1", locked)),
			change: []step{addNS(namespace("team-a", parent("org"), exclude("rolebindings/g1")))},
			want: []string{
				"MODIFIED team-a-1/g1 global@implicit-global conflict",
				"MODIFIED team-a/g1 global@implicit-global conflict",
			},
		},
		{
			name:   "locked parent item shadowed below",
			setup:  with(putRB("org", "p1", locked), putRB("team-a-1", "p1")),
			change: []step{putRB("team-a", "p1")},
			want:   []string{"MODIFIED team-a-1/p1 parent@org conflict", "MODIFIED team-a/p1 parent@org conflict"},
		},
		// Namespaces appearing and disappearing.
		{
			name: "namespace created after its children",
			setup: with(
				putRB(global, "g1"),
				addNS(namespace("kid", parent("late"))),
				addNS(namespace("grandkid", parent("kid"))),
				putRB("late", "p1"),
				putRB("late", "g1"),
			),
			change: []step{addNS(namespace("late"))},
			want: []string{
				"ADDED grandkid/p1 parent@late",
				"ADDED kid/p1 parent@late",
				"ADDED late/g1 local@late",
				"ADDED late/p1 local@late",
				"MODIFIED grandkid/g1 parent@late",
				"MODIFIED kid/g1 parent@late",
			},
		},
		{
			name:   "namespace deleted",
			setup:  with(putRB(global, "g1"), putRB(global, "g2"), putRB("org", "g2"), putRB("org", "p1")),
			change: []step{delNS("org")},
			want: []string{
				"DELETED org/g1 global@implicit-global",
				"DELETED org/g2 local@org",
				"DELETED org/p1 local@org",
				"DELETED team-a-1/p1 parent@org",
				"DELETED team-a/p1 parent@org",
				"DELETED team-b/p1 parent@org",
				"MODIFIED team-a-1/g2 global@implicit-global",
				"MODIFIED team-a/g2 global@implicit-global",
				"MODIFIED team-b/g2 global@implicit-global",
			},
		},
		{
			name:  "namespace deleted, final state unknown",
			setup: with(putRB(global, "g1"), putRB("team-a-1", "l1")),
			change: []step{func(m *watchmux.Mux) {
				m.OnNamespace(cache.DeletedFinalStateUnknown{Key: "team-a-1", Obj: namespace("team-a-1")}, false)
			}},
			want: []string{"DELETED team-a-1/g1 global@implicit-global", "DELETED team-a-1/l1 local@team-a-1"},
		},
		{
			name:   "global namespace deleted",
			setup:  with(putRB(global, "g1")),
			change: []step{delNS(global)},
			want:   []string{"DELETED implicit-global/g1 local@implicit-global"},
		},
		{
			name:   "namespace that never existed deleted",
			setup:  with(putRB(global, "g1")),
			change: []step{delNS("ghost")},
		},
		{
			name:   "namespace stops inheriting",
			setup:  with(putRB(global, "g1"), putRB("solo", "s1"), putRB("org", "p1")),
			change: []step{addNS(namespace("solo", noInherit)), addNS(namespace("team-a", parent("org"), noInherit))},
			want: []string{
				"DELETED solo/g1 global@implicit-global",
				"DELETED team-a-1/p1 parent@org",
				"DELETED team-a/g1 global@implicit-global",
				"DELETED team-a/p1 parent@org",
			},
		},
		{
			name:   "namespace starts inheriting",
			setup:  with(putRB(global, "g1"), putRB("legacy", "l1"), addNS(namespace("kid", parent("legacy")))),
			change: []step{addNS(namespace("legacy"))},
			want: []string{
				"ADDED kid/l1 parent@legacy",
				"ADDED legacy/g1 global@implicit-global",
			},
		},
		// Cycles.
		{
			name:   "cycle formed",
			setup:  cycle(),
			change: []step{addNS(namespace("c2", parent("c1")))},
			want:   []string{"DELETED c1/x parent@c2", "DELETED c3/x parent@c2"},
		},
		{
			name:   "cycle broken above",
			setup:  cycle(addNS(namespace("c2", parent("c1")))),
			change: []step{addNS(namespace("c2"))},
			want:   []string{"ADDED c1/x parent@c2", "ADDED c3/x parent@c2"},
		},
		{
			name:   "cycle broken below",
			setup:  cycle(addNS(namespace("c2", parent("c1")))),
			change: []step{addNS(namespace("c1"))},
			want:   []string{"ADDED c2/y parent@c1"},
		},
		{
			name:   "item added inside a cycle",
			setup:  cycle(addNS(namespace("c2", parent("c1")))),
			change: []step{putRB("c2", "z"), putRB("c1", "w")},
			want:   []string{"ADDED c1/w local@c1", "ADDED c2/z local@c2", "ADDED c3/w parent@c1"},
		},
		{
			name:   "namespace is its own parent",
			setup:  cycle(),
			change: []step{addNS(namespace("c2", parent("c2"))), putRB("c2", "z")},
			want:   []string{"ADDED c1/z parent@c2", "ADDED c2/z local@c2", "ADDED c3/z parent@c2"},
		},
		// Several changes in a row.
		{
			name:   "item moves up the hierarchy",
			setup:  hierarchy(),
			change: []step{putRB("team-a-1", "m"), putRB("team-a", "m"), delRB("team-a-1", "m"), putRB("org", "m"), delRB("team-a", "m")},
			want: []string{
				"ADDED team-a-1/m local@team-a-1",
				"ADDED team-a/m local@team-a",
				"ADDED team-b/m parent@org",
				"ADDED org/m local@org",
				"MODIFIED team-a-1/m parent@team-a",
				"MODIFIED team-a-1/m parent@org",
				"MODIFIED team-a/m parent@org",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newMux(watchmux.Options{})
			for _, s := range tt.setup {
				s(m)
			}
			m.MarkSynced()
			before := currentRV(t, m)
			f := watchAndFollow(t, m, watchmux.WatchOptions{ResourceVersion: rvText(before)})
			for _, s := range tt.change {
				s(m)
			}
			after := currentRV(t, m)
			got := f.waitFor(t, int(after-before))
			// Versions are consecutive: one per view event.
			for i, ev := range got {
				if rv := rvOf(t, ev); rv != before+uint64(i)+1 {
					t.Errorf("event %d (%s) has version %d, want %d", i, describeEvent(ev), rv, before+uint64(i)+1)
				}
			}
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if g := describeEvents(got); !slices.Equal(g, want) {
				t.Errorf("events:\n got %q\nwant %q", g, want)
			}
		})
	}
}

// TestViewEventsEveryResource checks that a namespace change makes the
// events of every served resource, each seen by the watchers of its own.
func TestViewEventsEveryResource(t *testing.T) {
	t.Parallel()
	m := newMux(watchmux.Options{}, rolebindings, roles)
	for _, s := range with(putRB("org", "p1"), put(roles, role("org", "r1")), put(roles, role("solo", "r2"))) {
		s(m)
	}
	m.MarkSynced()
	before := currentRV(t, m)
	rv := rvText(before)
	rbs := watchAndFollow(t, m, watchmux.WatchOptions{Resource: rolebindings, ResourceVersion: rv})
	rs := watchAndFollow(t, m, watchmux.WatchOptions{Resource: roles, ResourceVersion: rv})
	teamA := watchAndFollow(t, m, watchmux.WatchOptions{Resource: roles, Namespace: "team-a", ResourceVersion: rv})

	addNS(namespace("team-a", parent("solo")))(m)
	put(roles, role("team-a", "r3"))(m)

	gotRBs := rbs.waitFor(t, 2)
	gotRs := rs.waitFor(t, 6)
	gotTeamA := teamA.waitFor(t, 3)
	if after := currentRV(t, m); after-before != 8 {
		t.Errorf("%d events in all, want 8", after-before)
	}
	for _, tt := range []struct {
		name string
		got  []watch.Event
		want []string
	}{
		{name: "rolebindings", got: gotRBs, want: []string{"DELETED team-a-1/p1 parent@org", "DELETED team-a/p1 parent@org"}},
		{name: "roles", got: gotRs, want: []string{
			"ADDED team-a-1/r2 parent@solo", "ADDED team-a-1/r3 parent@team-a", "ADDED team-a/r2 parent@solo",
			"ADDED team-a/r3 local@team-a", "DELETED team-a-1/r1 parent@org", "DELETED team-a/r1 parent@org",
		}},
		{name: "roles in team-a", got: gotTeamA, want: []string{"ADDED team-a/r2 parent@solo", "ADDED team-a/r3 local@team-a", "DELETED team-a/r1 parent@org"}},
	} {
		if g := describeEvents(tt.got); !slices.Equal(g, tt.want) {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, g, tt.want)
		}
	}
}
