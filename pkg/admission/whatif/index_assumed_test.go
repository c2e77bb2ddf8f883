package whatif_test

import (
	"maps"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	tf "github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// lockedWorld is the hierarchy (tf.Hierarchy) with locked items at
// every scope:
//
//	implicit-global  g-lock (tf.Locked), g-open
//	org              o-lock (tf.Locked)
//	team-a           a-lock (locked: team-a-1 inherits it)
//	team-b           o-lock of its own (the lock keeps org's)
func lockedWorld() []tf.Step {
	return with(
		putRB(global, "g-lock", tf.Locked),
		putRB(global, "g-open"),
		putRB("org", "o-lock", tf.Locked),
		putRB("team-a", "a-lock", tf.Locked),
		putRB("team-b", "o-lock"),
	)
}

// nsMeta returns the labels and annotations of namespace's builder with opts.
func nsMeta(name string, opts ...tf.NamespaceOpt) whatif.NamespaceMeta {
	ns := tf.Namespace(name, opts...)
	return whatif.NamespaceMeta{Labels: ns.Labels, Annotations: ns.Annotations}
}

func TestLockedLoss(t *testing.T) {
	t.Parallel()
	lost := func(resource, namespace, name string, viewers ...string) whatif.LockedItem {
		return whatif.LockedItem{Resource: resource, Namespace: namespace, Name: name, Viewers: viewers}
	}
	parentUID := func(uid string) tf.NamespaceOpt {
		return func(ns *corev1.Namespace) { ns.Annotations[v1alpha1.AnnotationParentUID] = uid }
	}
	tests := []struct {
		name      string
		namespace string
		next      whatif.NamespaceMeta
		assumed   whatif.Assumed
		want      []whatif.LockedItem
	}{
		{
			name:      "opting out loses every inherited lock, in the subtree too",
			namespace: "team-a",
			next:      nsMeta("team-a", tf.Parent("org"), tf.NoInherit),
			want: []whatif.LockedItem{
				// team-a-1 stays a tenant and keeps the global ones.
				lost(rbResource, global, "g-lock", "team-a"),
				lost(rbResource, "org", "o-lock", "team-a", "team-a-1"),
				// team-a keeps its own a-lock; team-a-1 loses it.
				lost(rbResource, "team-a", "a-lock", "team-a-1"),
			},
		},
		{
			name:      "removing the parent loses the parent's locks, not the global ones",
			namespace: "team-a",
			next:      nsMeta("team-a"),
			want:      []whatif.LockedItem{lost(rbResource, "org", "o-lock", "team-a", "team-a-1")},
		},
		{
			name:      "changing the parent loses the old parent's locks",
			namespace: "team-a",
			next:      nsMeta("team-a", tf.Parent("solo")),
			want:      []whatif.LockedItem{lost(rbResource, "org", "o-lock", "team-a", "team-a-1")},
		},
		{
			name:      "a parent uid that is not the parent's loses its locks",
			namespace: "team-a",
			next:      nsMeta("team-a", tf.Parent("org"), parentUID("another-org")),
			want:      []whatif.LockedItem{lost(rbResource, "org", "o-lock", "team-a", "team-a-1")},
		},
		{
			name:      "a root opting out takes its locks from every child, which keep the global ones",
			namespace: "org",
			next:      nsMeta("org", tf.NoInherit),
			want: []whatif.LockedItem{
				lost(rbResource, global, "g-lock", "org"),
				lost(rbResource, "org", "o-lock", "team-a", "team-a-1", "team-b"),
			},
		},
		{
			name:      "excluding a locked item loses nothing: the lock keeps it",
			namespace: "team-a",
			next:      nsMeta("team-a", tf.Parent("org"), tf.Exclude("rolebindings/*")),
		},
		{
			name:      "another label loses nothing",
			namespace: "team-a",
			next: nsMeta("team-a", tf.Parent("org"), func(ns *corev1.Namespace) {
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
			next:      nsMeta("ghost", tf.NoInherit),
		},
		{
			name:      "an assumed child below is in the subtree",
			namespace: "team-a",
			next:      nsMeta("team-a"),
			assumed:   whatif.Assumed{"new": nsMeta("new", tf.Parent("team-a-1"))},
			want:      []whatif.LockedItem{lost(rbResource, "org", "o-lock", "new", "team-a", "team-a-1")},
		},
		{
			name:      "an assumed move out of the subtree leaves it",
			namespace: "team-a",
			next:      nsMeta("team-a"),
			assumed:   whatif.Assumed{"team-a-1": nsMeta("team-a-1", tf.Parent("solo"))},
			want:      []whatif.LockedItem{lost(rbResource, "org", "o-lock", "team-a")},
		},
		{
			name:      "an assumed change of the namespace itself is the before",
			namespace: "team-a",
			next:      nsMeta("team-a"),
			assumed:   whatif.Assumed{"team-a": nsMeta("team-a")},
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
	if _, err := m.SourceLocked(rbResource, global, "g-lock"); !watchmux.IsNotSynced(err) {
		t.Errorf("SourceLocked before sync: %v, want the not-synced error", err)
	}
}

func TestParentCycleAssuming(t *testing.T) {
	t.Parallel()
	m := muxOf(t, true, lockedWorld())
	tests := []struct {
		name              string
		namespace, parent string
		assumed           whatif.Assumed
		want              []string
	}{
		{name: "a descendant as parent", namespace: "org", parent: "team-a-1", want: []string{"org", "team-a-1", "team-a", "org"}},
		{name: "a stranger as parent", namespace: "org", parent: "solo"},
		{name: "a missing parent", namespace: "org", parent: "ghost"},
		{
			name: "an assumed change closes the cycle", namespace: "org", parent: "solo",
			assumed: whatif.Assumed{"solo": nsMeta("solo", tf.Parent("team-b"))},
			want:    []string{"org", "solo", "team-b", "org"},
		},
		{
			name: "an assumed namespace not yet in the index", namespace: "org", parent: "new",
			assumed: whatif.Assumed{"new": nsMeta("new", tf.Parent("team-a"))},
			want:    []string{"org", "new", "team-a", "org"},
		},
		{
			name: "an assumed change opens the cycle", namespace: "org", parent: "team-a-1",
			assumed: whatif.Assumed{"team-a-1": nsMeta("team-a-1")},
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
		got, err := m.SourceLocked(rbResource, tc.namespace, tc.name)
		if err != nil || got != tc.want {
			t.Errorf("SourceLocked(%s/%s) = %v, %v; want %v", tc.namespace, tc.name, got, err, tc.want)
		}
	}
	if got, err := m.SourceLocked("unserved", global, "g-lock"); err != nil || got {
		t.Errorf("SourceLocked of an unserved resource = %v, %v; want false", got, err)
	}
}
