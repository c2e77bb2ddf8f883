package whatif_test

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	tf "github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// guardedWorld is the hierarchy (tf.Hierarchy) with sources the guards
// ask about:
//
//	implicit-global  g1, g2 (tf.Locked)
//	org              p1
//	team-a           p1 (shadows org's for team-a and team-a-1)
//	team-b           g1 (shadows the global one)
//	kube-system      g1 (not a tenant: its own view only)
//	solo             excludes rolebindings/g1 and rolebindings/g2 (the lock keeps g2)
//	x <-> y          a parent cycle
//	orphan           names parent ghost, which does not exist
func guardedWorld(more ...tf.Step) []tf.Step {
	return with(append([]tf.Step{
		tf.AddNamespace(tf.Namespace("solo", tf.Exclude("rolebindings/g1,rolebindings/g2"))),
		tf.AddNamespace(tf.Namespace("x", tf.Parent("y"))),
		tf.AddNamespace(tf.Namespace("y", tf.Parent("x"))),
		tf.AddNamespace(tf.Namespace("orphan", tf.Parent("ghost"))),
		putRB(global, "g1"),
		putRB(global, "g2", tf.Locked),
		putRB("org", "p1"),
		putRB("team-a", "p1"),
		putRB("team-b", "g1"),
		putRB("kube-system", "g1"),
	}, more...)...)
}

// changedNamespaces returns the namespaces whose view differs between two
// tf.Views.
var changedNamespaces = tf.ChangedNamespaces

func TestReach(t *testing.T) {
	t.Parallel()
	unlocked := func(m *metav1.ObjectMeta) { delete(m.Annotations, v1alpha1.AnnotationLocked) }
	// everyone is the global namespace and every tenant, sorted; the
	// tenants in the cycle and below the missing parent inherit from the
	// global namespace too.
	everyone := []string{global, "org", "orphan", "solo", "team-a", "team-a-1", "team-b", "x", "y"}
	// showsG1 are the views that show the global g1: not team-b (shadow)
	// nor solo (exclusion).
	showsG1 := []string{global, "org", "orphan", "team-a", "team-a-1", "x", "y"}
	tests := []struct {
		name      string
		resource  string
		namespace string
		itemName  string
		// obj is the object after the change; nil: deleted.
		obj runtime.Object
		// want are the namespaces whose view changes.
		want []string
	}{
		{
			name: "update of a global item: the global namespace and every tenant that shows it",
			obj:  tf.SourceRoleBinding(global, "g1"), namespace: global, itemName: "g1",
			want: showsG1,
		},
		{
			name:      "delete of a global item",
			namespace: global, itemName: "g1",
			want: showsG1,
		},
		{
			name: "update of a locked global item reaches shadows and exclusions too",
			obj:  tf.SourceRoleBinding(global, "g2", tf.Locked), namespace: global, itemName: "g2",
			want: everyone,
		},
		{
			name: "locking a global item changes the views that shadowed or excluded it",
			obj:  tf.SourceRoleBinding(global, "g1", tf.Locked), namespace: global, itemName: "g1",
			want: everyone,
		},
		{
			name: "unlocking a global item leaves the exclusion to remove it",
			obj:  tf.SourceRoleBinding(global, "g2", unlocked), namespace: global, itemName: "g2",
			want: everyone,
		},
		{
			name: "a new global item reaches every tenant",
			obj:  tf.SourceRoleBinding(global, "new"), namespace: global, itemName: "new",
			want: everyone,
		},
		{
			name: "update of a parent item: 0 where it is shadowed",
			obj:  tf.SourceRoleBinding("org", "p1"), namespace: "org", itemName: "p1",
			want: []string{"org", "team-b"},
		},
		{
			name:      "delete of a parent item: 0 where it is shadowed",
			namespace: "org", itemName: "p1",
			want: []string{"org", "team-b"},
		},
		{
			name: "update of the shadowing item reaches its subtree",
			obj:  tf.SourceRoleBinding("team-a", "p1"), namespace: "team-a", itemName: "p1",
			want: []string{"team-a", "team-a-1"},
		},
		{
			name: "update of a shadow in a leaf",
			obj:  tf.SourceRoleBinding("team-b", "g1"), namespace: "team-b", itemName: "g1",
			want: []string{"team-b"},
		},
		{
			name:      "delete of a shadow in a leaf uncovers the inherited item",
			namespace: "team-b", itemName: "g1",
			want: []string{"team-b"},
		},
		{
			name: "a non-tenant's item reaches its own view only",
			obj:  tf.SourceRoleBinding("kube-system", "g1"), namespace: "kube-system", itemName: "g1",
			want: []string{"kube-system"},
		},
		{
			name: "an item in a parent cycle reaches its own view only",
			obj:  tf.SourceRoleBinding("x", "c"), namespace: "x", itemName: "c",
			want: []string{"x"},
		},
		{
			name:      "delete of an item that does not exist",
			namespace: "org", itemName: "nothing",
		},
		{
			name: "an item in a namespace that does not exist",
			obj:  tf.SourceRoleBinding("ghost", "g1"), namespace: "ghost", itemName: "g1",
		},
		{
			name: "another resource has its own items",
			obj:  tf.SourceRole(global, "g1"), resource: roleResource, namespace: global, itemName: "g1",
			want: everyone,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resource := tc.resource
			if resource == "" {
				resource = rbResource
			}
			steps := guardedWorld()
			m := muxOf(t, true, steps, rbResource, roleResource)
			beforeViews, beforeRV := tf.Views(t, m.Mux, resource)

			n, err := m.Reach(resource, tc.namespace, tc.itemName, tc.obj)
			if err != nil {
				t.Fatalf("Reach: %v", err)
			}
			if n != len(tc.want) {
				t.Errorf("Reach = %d, want %d (%q)", n, len(tc.want), tc.want)
			}

			// Reach only asks: the mirror is unchanged.
			afterViews, afterRV := tf.Views(t, m.Mux, resource)
			if afterRV != beforeRV || !reflect.DeepEqual(afterViews, beforeViews) {
				t.Errorf("Reach changed the mirror: %s -> %s, changed views %q", beforeRV, afterRV, changedNamespaces(beforeViews, afterViews))
			}

			// The change itself changes exactly those views.
			applied := muxOf(t, true, steps, rbResource, roleResource)
			before, _ := tf.Views(t, applied.Mux, resource)
			if tc.obj != nil {
				put(resource, tc.obj)(applied.Mux)
			} else {
				var gone runtime.Object = tf.SourceRoleBinding(tc.namespace, tc.itemName)
				if resource == roleResource {
					gone = tf.SourceRole(tc.namespace, tc.itemName)
				}
				del(resource, gone)(applied.Mux)
			}
			after, _ := tf.Views(t, applied.Mux, resource)
			if got := changedNamespaces(before, after); !reflect.DeepEqual(got, nilIfEmpty(tc.want)) {
				t.Errorf("applying the change changed the views of %q, want %q", got, tc.want)
			}
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return []string{}
	}
	return s
}

func TestReachErrors(t *testing.T) {
	t.Parallel()
	unsynced := muxOf(t, false, guardedWorld())
	if _, err := unsynced.Reach(rbResource, global, "g1", nil); !watchmux.IsNotSynced(err) {
		t.Errorf("Reach before sync: %v, want the not-synced error", err)
	}
	m := muxOf(t, true, guardedWorld())
	if n, err := m.Reach("networkpolicies", global, "g1", nil); n != 0 || err != nil {
		t.Errorf("Reach of a resource not served = %d, %v; want 0, nil", n, err)
	}
	if _, err := m.Reach(rbResource, global, "g1", &metav1.Status{}); err == nil {
		t.Errorf("Reach of an object without metadata: no error")
	}
}

func TestInherited(t *testing.T) {
	t.Parallel()
	m := muxOf(t, true, guardedWorld(putRB("team-a-1", "own")), rbResource, roleResource)
	tests := []struct {
		name                string
		resource, namespace string
		itemName            string
		wantFound           bool
		wantScope           merge.Scope
		wantSource          string
		wantLocked          bool
	}{
		{name: "global item", namespace: "org", itemName: "g1", wantFound: true, wantScope: merge.ScopeGlobal, wantSource: global},
		{name: "the namespace's own object is ignored", namespace: "team-b", itemName: "g1", wantFound: true, wantScope: merge.ScopeGlobal, wantSource: global},
		{name: "the nearest parent wins", namespace: "team-a-1", itemName: "p1", wantFound: true, wantScope: merge.ScopeParent, wantSource: "team-a"},
		{name: "the own shadow is ignored, the parent's shows", namespace: "team-a", itemName: "p1", wantFound: true, wantScope: merge.ScopeParent, wantSource: "org"},
		{name: "a locked item", namespace: "team-a-1", itemName: "g2", wantFound: true, wantScope: merge.ScopeGlobal, wantSource: global, wantLocked: true},
		{name: "a locked item survives an exclusion", namespace: "solo", itemName: "g2", wantFound: true, wantScope: merge.ScopeGlobal, wantSource: global, wantLocked: true},
		{name: "an excluded item", namespace: "solo", itemName: "g1"},
		{name: "only a local object", namespace: "team-a-1", itemName: "own"},
		{name: "nothing of that name", namespace: "org", itemName: "nothing"},
		{name: "the global namespace inherits nothing", namespace: global, itemName: "g1"},
		{name: "a non-tenant inherits nothing", namespace: "kube-system", itemName: "g1"},
		{name: "a namespace that does not exist", namespace: "ghost", itemName: "g1"},
		{name: "another resource", resource: roleResource, namespace: "org", itemName: "g1"},
		{name: "a resource not served", resource: "networkpolicies", namespace: "org", itemName: "g1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resource := tc.resource
			if resource == "" {
				resource = rbResource
			}
			r, found, err := m.Inherited(resource, tc.namespace, tc.itemName)
			if err != nil {
				t.Fatalf("Inherited: %v", err)
			}
			if found != tc.wantFound {
				t.Fatalf("found = %v (%+v), want %v", found, r, tc.wantFound)
			}
			if !found {
				return
			}
			if r.Scope != tc.wantScope || r.Item.Namespace != tc.wantSource || r.Item.Name != tc.itemName || r.Item.Locked != tc.wantLocked {
				t.Errorf("Inherited = %s %s/%s locked %v, want %s %s/%s locked %v",
					r.Scope, r.Item.Namespace, r.Item.Name, r.Item.Locked, tc.wantScope, tc.wantSource, tc.itemName, tc.wantLocked)
			}
		})
	}

	if _, _, err := muxOf(t, false, guardedWorld()).Inherited(rbResource, "org", "g1"); !watchmux.IsNotSynced(err) {
		t.Errorf("Inherited before sync: %v, want the not-synced error", err)
	}
}

func TestHasDescendants(t *testing.T) {
	t.Parallel()
	m := muxOf(t, true, guardedWorld())
	want := map[string]bool{
		"org": true, "team-a": true, "x": true, "y": true, "ghost": true,
		"team-a-1": false, "team-b": false, "solo": false, global: false, "kube-system": false, "nowhere": false,
	}
	for ns, w := range want {
		if got := m.HasDescendants(ns); got != w {
			t.Errorf("HasDescendants(%q) = %v, want %v", ns, got, w)
		}
	}
	tf.DeleteNamespace("team-a-1")(m.Mux)
	if m.HasDescendants("team-a") {
		t.Errorf("HasDescendants(team-a) after its only child is deleted = true")
	}
	tf.AddNamespace(tf.Namespace("team-b"))(m.Mux)
	tf.AddNamespace(tf.Namespace("team-a"))(m.Mux)
	if m.HasDescendants("org") {
		t.Errorf("HasDescendants(org) after its children dropped the label = true")
	}
}

func TestExistsIsTenant(t *testing.T) {
	t.Parallel()
	m := muxOf(t, true, guardedWorld())
	tests := []struct {
		namespace          string
		wantExists, tenant bool
	}{
		{global, true, false},
		{"kube-system", true, false},
		{"legacy", true, false},
		{"org", true, true},
		{"team-a-1", true, true},
		{"x", true, true},
		{"ghost", false, false},
	}
	for _, tc := range tests {
		if got := m.Exists(tc.namespace); got != tc.wantExists {
			t.Errorf("Exists(%q) = %v, want %v", tc.namespace, got, tc.wantExists)
		}
		if got := m.IsTenant(tc.namespace); got != tc.tenant {
			t.Errorf("IsTenant(%q) = %v, want %v", tc.namespace, got, tc.tenant)
		}
	}
	tf.DeleteNamespace("org")(m.Mux)
	if m.Exists("org") || m.IsTenant("org") {
		t.Errorf("org after its deletion: Exists %v, IsTenant %v; want false, false", m.Exists("org"), m.IsTenant("org"))
	}
}

func TestParentCycle(t *testing.T) {
	t.Parallel()
	m := muxOf(t, true, guardedWorld())
	tests := []struct {
		name              string
		namespace, parent string
		want              []string
	}{
		{name: "self", namespace: "solo", parent: "solo", want: []string{"solo", "solo"}},
		{name: "direct: the child as parent", namespace: "org", parent: "team-a", want: []string{"org", "team-a", "org"}},
		{name: "indirect: a grandchild as parent", namespace: "org", parent: "team-a-1", want: []string{"org", "team-a-1", "team-a", "org"}},
		{name: "re-parenting below itself", namespace: "team-a", parent: "team-a-1", want: []string{"team-a", "team-a-1", "team-a"}},
		{name: "no cycle: a root", namespace: "solo", parent: "org"},
		{name: "no cycle: a sibling", namespace: "team-b", parent: "team-a"},
		{name: "no cycle: a cousin's child", namespace: "team-b", parent: "team-a-1"},
		{name: "a cycle above, not through the namespace", namespace: "solo", parent: "x"},
		{name: "a parent that does not exist", namespace: "solo", parent: "ghost"},
		{name: "a new namespace", namespace: "new", parent: "org"},
		{name: "a member of a cycle re-parented into it", namespace: "x", parent: "y", want: []string{"x", "y", "x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := m.ParentCycle(tc.namespace, tc.parent); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParentCycle(%q, %q) = %q, want %q", tc.namespace, tc.parent, got, tc.want)
			}
		})
	}
}

// nonEmpty drops the resources without locked names.
func nonEmpty(m map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range m {
		if len(v) > 0 {
			out[k] = v
		}
	}
	return out
}

func TestGuarded(t *testing.T) {
	t.Parallel()
	steps := guardedWorld(
		putRB("org", "g2", tf.Locked), // a locked name in two namespaces is listed once
		putRB("team-b", "local-lock", tf.Locked),
		putRB("kube-system", "k", tf.Locked),
		put(roleResource, tf.SourceRole("org", "r", tf.Locked)),
		put(roleResource, tf.SourceRole("org", "open")),
	)
	unsynced := muxOf(t, false, steps, rbResource, roleResource)
	if g, ok := unsynced.Guarded(); ok || !reflect.DeepEqual(g, webhookconfig.MatchInputs{}) {
		t.Errorf("Guarded before sync = %+v, %v; want nothing, false", g, ok)
	}

	m := muxOf(t, true, steps, rbResource, roleResource)
	check := func(t *testing.T, wantLocked map[string][]string, wantInherited []string) {
		t.Helper()
		g, ok := m.Guarded()
		if !ok {
			t.Fatalf("Guarded after sync: false")
		}
		if got := nonEmpty(g.LockedNames); !reflect.DeepEqual(got, wantLocked) {
			t.Errorf("LockedNames = %q, want %q", got, wantLocked)
		}
		if !reflect.DeepEqual(g.Inherited, wantInherited) {
			t.Errorf("Inherited = %q, want %q", g.Inherited, wantInherited)
		}
		if s := g.String(); s == "" {
			t.Errorf("Guarded.String() is empty")
		}
	}
	check(t,
		map[string][]string{rbResource: {"g2", "k", "local-lock"}, roleResource: {"r"}},
		[]string{"ghost", global, "org", "team-a", "x", "y"})

	// The answer follows the sources.
	putRB(global, "g2")(m.Mux)
	putRB("team-b", "local-lock")(m.Mux)
	del(roleResource, tf.SourceRole("org", "r"))(m.Mux)
	tf.DeleteNamespace("team-a-1")(m.Mux)
	tf.DeleteNamespace("orphan")(m.Mux)
	check(t,
		map[string][]string{rbResource: {"g2", "k"}},
		[]string{global, "org", "x", "y"})

	// The global namespace is always inherited, and listed once when a
	// namespace names it as parent.
	tf.AddNamespace(tf.Namespace("rogue", tf.Parent(global)))(m.Mux)
	check(t,
		map[string][]string{rbResource: {"g2", "k"}},
		[]string{global, "org", "x", "y"})
}

// TestIndexBeforeSync: before the sources are read, the questions without
// an error answer as of an empty mirror, and Guarded is not ready.
func TestIndexBeforeSync(t *testing.T) {
	t.Parallel()
	steps := guardedWorld(tf.AddNamespace(tf.Namespace("team-a", tf.Parent("org"))))
	synced, unsynced := muxOf(t, true, steps), muxOf(t, false, steps)
	for _, tc := range []struct {
		name string
		ask  func(m mirror) bool
	}{
		{name: "Exists", ask: func(m mirror) bool { return m.Exists("org") }},
		{name: "IsTenant", ask: func(m mirror) bool { return m.IsTenant("org") }},
		{name: "HasDescendants", ask: func(m mirror) bool { return m.HasDescendants("org") }},
		{name: "ParentCycleAssuming", ask: func(m mirror) bool { return m.ParentCycle("y", "x") != nil }},
		{name: "Guarded", ask: func(m mirror) bool { _, ok := m.Guarded(); return ok }},
	} {
		if !tc.ask(synced) {
			t.Errorf("%s: false once synced, want true", tc.name)
		}
		if tc.ask(unsynced) {
			t.Errorf("%s: true before sync, want false", tc.name)
		}
	}
}
