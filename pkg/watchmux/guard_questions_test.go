package watchmux_test

import (
	"maps"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// lockedWorld is the hierarchy (see delta_test.go) with locked items at
// every scope:
//
//	implicit-global  g-lock (locked), g-open
//	org              o-lock (locked)
//	team-a           a-lock (locked: team-a-1 inherits it)
//	team-b           o-lock of its own (the lock keeps org's)
func lockedWorld() []step {
	return with(
		putRB(global, "g-lock", locked),
		putRB(global, "g-open"),
		putRB("org", "o-lock", locked),
		putRB("team-a", "a-lock", locked),
		putRB("team-b", "o-lock"),
	)
}

// nsMeta returns the labels and annotations of namespace's builder with opts.
func nsMeta(name string, opts ...nsOpt) watchmux.NamespaceMeta {
	ns := namespace(name, opts...)
	return watchmux.NamespaceMeta{Labels: ns.Labels, Annotations: ns.Annotations}
}

func TestLockedLoss(t *testing.T) {
	t.Parallel()
	lost := func(resource, namespace, name string, viewers ...string) watchmux.LockedItem {
		return watchmux.LockedItem{Resource: resource, Namespace: namespace, Name: name, Viewers: viewers}
	}
	parentUID := func(uid string) nsOpt {
		return func(ns *corev1.Namespace) { ns.Annotations[merge.AnnotationParentUID] = uid }
	}
	tests := []struct {
		name      string
		namespace string
		next      watchmux.NamespaceMeta
		assumed   watchmux.Assumed
		want      []watchmux.LockedItem
	}{
		{
			name:      "opting out loses every inherited lock, in the subtree too",
			namespace: "team-a",
			next:      nsMeta("team-a", parent("org"), noInherit),
			want: []watchmux.LockedItem{
				// team-a-1 stays a tenant and keeps the global ones.
				lost(rolebindings, global, "g-lock", "team-a"),
				lost(rolebindings, "org", "o-lock", "team-a", "team-a-1"),
				// team-a keeps its own a-lock; team-a-1 loses it.
				lost(rolebindings, "team-a", "a-lock", "team-a-1"),
			},
		},
		{
			name:      "removing the parent loses the parent's locks, not the global ones",
			namespace: "team-a",
			next:      nsMeta("team-a"),
			want:      []watchmux.LockedItem{lost(rolebindings, "org", "o-lock", "team-a", "team-a-1")},
		},
		{
			name:      "changing the parent loses the old parent's locks",
			namespace: "team-a",
			next:      nsMeta("team-a", parent("solo")),
			want:      []watchmux.LockedItem{lost(rolebindings, "org", "o-lock", "team-a", "team-a-1")},
		},
		{
			name:      "a parent uid that is not the parent's loses its locks",
			namespace: "team-a",
			next:      nsMeta("team-a", parent("org"), parentUID("another-org")),
			want:      []watchmux.LockedItem{lost(rolebindings, "org", "o-lock", "team-a", "team-a-1")},
		},
		{
			name:      "a root opting out takes its locks from every child, which keep the global ones",
			namespace: "org",
			next:      nsMeta("org", noInherit),
			want: []watchmux.LockedItem{
				lost(rolebindings, global, "g-lock", "org"),
				lost(rolebindings, "org", "o-lock", "team-a", "team-a-1", "team-b"),
			},
		},
		{
			name:      "excluding a locked item loses nothing: the lock keeps it",
			namespace: "team-a",
			next:      nsMeta("team-a", parent("org"), exclude("rolebindings/*")),
		},
		{
			name:      "another label loses nothing",
			namespace: "team-a",
			next: nsMeta("team-a", parent("org"), func(ns *corev1.Namespace) {
				ns.Labels["team"] = "a"
			}),
		},
		{
			name:      "opting back in loses nothing",
			namespace: "legacy",
			next:      nsMeta("legacy"),
		},
		{
			name:      "a namespace that does not exist loses nothing",
			namespace: "ghost",
			next:      nsMeta("ghost", noInherit),
		},
		{
			name:      "an assumed child below is in the subtree",
			namespace: "team-a",
			next:      nsMeta("team-a"),
			assumed:   watchmux.Assumed{"new": nsMeta("new", parent("team-a-1"))},
			want:      []watchmux.LockedItem{lost(rolebindings, "org", "o-lock", "new", "team-a", "team-a-1")},
		},
		{
			name:      "an assumed move out of the subtree leaves it",
			namespace: "team-a",
			next:      nsMeta("team-a"),
			assumed:   watchmux.Assumed{"team-a-1": nsMeta("team-a-1", parent("solo"))},
			want:      []watchmux.LockedItem{lost(rolebindings, "org", "o-lock", "team-a")},
		},
		{
			name:      "an assumed change of the namespace itself is the before",
			namespace: "team-a",
			next:      nsMeta("team-a"),
			assumed:   watchmux.Assumed{"team-a": nsMeta("team-a")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := muxOf(t, true, lockedWorld())
			assumed := maps.Clone(tc.assumed)
			got, err := m.LockedLoss(tc.namespace, tc.next, tc.assumed)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				got = nil
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("lost\n%+v\nwant\n%+v", got, tc.want)
			}
			if !reflect.DeepEqual(tc.assumed, assumed) {
				t.Errorf("LockedLoss changed the assumptions to %+v", tc.assumed)
			}
			// The question changes nothing.
			if again, _ := m.LockedLoss(tc.namespace, tc.next, tc.assumed); len(again) != len(got) {
				t.Errorf("asked again: %+v, want %+v", again, got)
			}
		})
	}
}

func TestLockedLossBeforeSync(t *testing.T) {
	t.Parallel()
	m := muxOf(t, false, lockedWorld())
	if _, err := m.LockedLoss("team-a", nsMeta("team-a"), nil); !watchmux.IsNotSynced(err) {
		t.Errorf("LockedLoss before sync: %v, want the not-synced error", err)
	}
	if _, err := m.SourceLocked(rolebindings, global, "g-lock"); !watchmux.IsNotSynced(err) {
		t.Errorf("SourceLocked before sync: %v, want the not-synced error", err)
	}
}

func TestParentCycleAssuming(t *testing.T) {
	t.Parallel()
	m := muxOf(t, true, lockedWorld())
	tests := []struct {
		name              string
		namespace, parent string
		assumed           watchmux.Assumed
		want              []string
	}{
		{name: "a descendant as parent", namespace: "org", parent: "team-a-1", want: []string{"org", "team-a-1", "team-a", "org"}},
		{name: "a stranger as parent", namespace: "org", parent: "solo"},
		{name: "a missing parent", namespace: "org", parent: "ghost"},
		{
			name: "an assumed change closes the cycle", namespace: "org", parent: "solo",
			assumed: watchmux.Assumed{"solo": nsMeta("solo", parent("team-b"))},
			want:    []string{"org", "solo", "team-b", "org"},
		},
		{
			name: "an assumed namespace not yet in the index", namespace: "org", parent: "new",
			assumed: watchmux.Assumed{"new": nsMeta("new", parent("team-a"))},
			want:    []string{"org", "new", "team-a", "org"},
		},
		{
			name: "an assumed change opens the cycle", namespace: "org", parent: "team-a-1",
			assumed: watchmux.Assumed{"team-a-1": nsMeta("team-a-1")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := m.ParentCycleAssuming(tc.namespace, tc.parent, tc.assumed); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("cycle %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSourceLocked(t *testing.T) {
	t.Parallel()
	m := muxOf(t, true, lockedWorld())
	for _, tc := range []struct {
		namespace, name string
		want            bool
	}{
		{global, "g-lock", true},
		{global, "g-open", false},
		{"team-b", "o-lock", false},
		{"team-b", "missing", false},
	} {
		got, err := m.SourceLocked(rolebindings, tc.namespace, tc.name)
		if err != nil || got != tc.want {
			t.Errorf("SourceLocked(%s/%s) = %v, %v; want %v", tc.namespace, tc.name, got, err, tc.want)
		}
	}
	if got, err := m.SourceLocked("unserved", global, "g-lock"); err != nil || got {
		t.Errorf("SourceLocked of an unserved resource = %v, %v; want false", got, err)
	}
}
