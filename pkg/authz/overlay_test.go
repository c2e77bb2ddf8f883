package authz_test

import (
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// overlay annotates a source object implicit.dev/merge: overlay.
func overlay(m *metav1.ObjectMeta) { m.Annotations[v1alpha1.AnnotationMerge] = "overlay" }

// subjects is a shorthand for a subject list.
func subjects(s ...rbacv1.Subject) []rbacv1.Subject { return s }

// TestAuthorizeOverlays decides requests against RoleBindings merged with
// the Overlay strategy (DESIGN.md, "Merge rules" and "Enforcing inherited
// RoleBindings"): overlays from above the request's namespace count as the
// merged view shows them; the namespace's own overlay is RBAC's to judge, so
// it can neither widen an inherited grant nor, against a lock, narrow it.
func TestAuthorizeOverlays(t *testing.T) {
	t.Parallel()
	ov := testfixture.RoleBindingOverlayer(t)

	// check is one request in a scenario; want is the substrings of the
	// reason when allowed, nil for no opinion.
	type check struct {
		name  string
		attrs authz.Attributes
		want  []string
	}
	// view is what a namespace's view must show of a binding: the test's
	// premise, so a decision is judged against the right merge.
	type view struct {
		namespace, name string
		subjects        []rbacv1.Subject
		roleRef         rbacv1.RoleRef
		overlays        string
	}
	tests := []struct {
		name     string
		strategy merge.Strategy
		objs     []runtime.Object
		views    []view
		checks   []check
	}{
		{
			name: "(a) a parent's overlay adds subjects to a locked global base: granted below as merged",
			objs: []runtime.Object{
				namespace(global), namespace("org"), namespace("team", parent("org")), namespace("team-dev", parent("team")),
				roleBinding(global, "devs", clusterRoleRef("view"), nil, locked, overlay),
				roleBinding("org", "devs", clusterRoleRef("view"), subjects(group("team:devs"))),
			},
			views: []view{
				{namespace: "team", name: "devs", subjects: subjects(group("team:devs")), roleRef: clusterRoleRef("view"), overlays: "org/devs"},
				{namespace: "org", name: "devs", subjects: subjects(group("team:devs")), roleRef: clusterRoleRef("view"), overlays: "org/devs"},
			},
			checks: []check{
				{name: "child", attrs: podReader("dana", []string{"team:devs"}, "team"),
					want: []string{`RoleBinding "devs"`, `namespace "implicit-global" (global)`, "ClusterRole view"}},
				{name: "grandchild", attrs: podReader("dana", []string{"team:devs"}, "team-dev"),
					want: []string{`RoleBinding "devs"`}},
				{name: "verb the ClusterRole lacks", attrs: with(podReader("dana", []string{"team:devs"}, "team"), "delete")},
				{name: "group the overlay does not name", attrs: podReader("dana", []string{"team:ops"}, "team")},
				// In org the overlay is the namespace's own object: RBAC's.
				{name: "not in the overlay's own namespace", attrs: podReader("dana", []string{"team:devs"}, "org")},
				{name: "not in an unrelated tenant", attrs: podReader("dana", []string{"team:devs"}, "elsewhere")},
			},
		},
		{
			name: "(a) a parent's overlay can't change a locked base's roleRef: granted as the lock holds it",
			objs: []runtime.Object{
				namespace(global), namespace("org"), namespace("team", parent("org")),
				roleBinding(global, "devs", clusterRoleRef("view"), nil, locked, overlay),
				roleBinding("org", "devs", clusterRoleRef("admin"), subjects(group("team:devs"))),
			},
			views: []view{
				{namespace: "team", name: "devs", subjects: subjects(group("team:devs")), roleRef: clusterRoleRef("view"), overlays: "org/devs"},
			},
			checks: []check{
				{name: "what view grants", attrs: podReader("dana", []string{"team:devs"}, "team"),
					want: []string{`RoleBinding "devs"`, "ClusterRole view"}},
				{name: "not what the blocked admin would", attrs: with(podReader("dana", []string{"team:devs"}, "team"), "delete")},
			},
		},
		{
			name: "(b) a local overlay adding subjects to a locked global base does not widen",
			objs: []runtime.Object{
				namespace(global), namespace("tenant"), namespace("tenant-child", parent("tenant")),
				roleBinding(global, "viewers", clusterRoleRef("view"), nil, locked, overlay),
				roleBinding("tenant", "viewers", clusterRoleRef("view"), subjects(user("mallory"))),
			},
			views: []view{
				// The view shows mallory: the webhook must still say nothing.
				{namespace: "tenant", name: "viewers", subjects: subjects(user("mallory")), roleRef: clusterRoleRef("view"), overlays: "tenant/viewers"},
			},
			checks: []check{
				{name: "mallory in the overlay's namespace", attrs: podReader("mallory", nil, "tenant")},
				// Below tenant the overlay is a parent's: rule (a).
				{name: "mallory below, as a parent's overlay", attrs: podReader("mallory", nil, "tenant-child"),
					want: []string{`RoleBinding "viewers"`}},
			},
		},
		{
			name: "(b) a local overlay on top of a parent's: only what both grant",
			objs: []runtime.Object{
				namespace(global), namespace("org"), namespace("team", parent("org")),
				roleBinding(global, "devs", clusterRoleRef("view"), nil, locked, overlay),
				roleBinding("org", "devs", clusterRoleRef("view"), subjects(group("team:devs"))),
				roleBinding("team", "devs", clusterRoleRef("view"), subjects(user("mallory"))),
			},
			views: []view{
				{namespace: "team", name: "devs", subjects: subjects(user("mallory")), roleRef: clusterRoleRef("view"), overlays: "org/devs,team/devs"},
			},
			checks: []check{
				{name: "the local overlay's subject", attrs: podReader("mallory", nil, "team")},
				{name: "the parent's subject, replaced in the view", attrs: podReader("dana", []string{"team:devs"}, "team")},
			},
		},
		{
			name:     "(c) a local overlay can't narrow a locked base: the lock keeps its subjects",
			strategy: merge.Overlay,
			objs: []runtime.Object{
				namespace(global), namespace("tenant"),
				roleBinding(global, "auditors", clusterRoleRef("view"), subjects(group("org:auditors")), locked),
				roleBinding("tenant", "auditors", clusterRoleRef("view"), subjects(user("other"))),
			},
			views: []view{
				{namespace: "tenant", name: "auditors", subjects: subjects(group("org:auditors")), roleRef: clusterRoleRef("view"), overlays: "tenant/auditors"},
			},
			checks: []check{
				{name: "the locked subject", attrs: podReader("ann", []string{"org:auditors"}, "tenant"),
					want: []string{`RoleBinding "auditors"`, `namespace "implicit-global" (global)`, "ClusterRole view"}},
				{name: "the blocked subject", attrs: podReader("other", nil, "tenant")},
			},
		},
		{
			name: "(d) a local overlay replacing an unlocked base's subjects: only what both grant",
			objs: []runtime.Object{
				namespace(global), namespace("tenant"), namespace("other"),
				roleBinding(global, "readers", clusterRoleRef("view"), subjects(user("alice"), user("both"))),
				roleBinding("tenant", "readers", clusterRoleRef("view"), subjects(user("both"), user("bob")), overlay),
			},
			views: []view{
				{namespace: "tenant", name: "readers", subjects: subjects(user("both"), user("bob")), roleRef: clusterRoleRef("view"), overlays: "tenant/readers"},
			},
			checks: []check{
				{name: "base subject alone: the view no longer shows it", attrs: podReader("alice", nil, "tenant")},
				{name: "overlay subject alone: local content is RBAC's", attrs: podReader("bob", nil, "tenant")},
				{name: "subject in both", attrs: podReader("both", nil, "tenant"),
					want: []string{`RoleBinding "readers"`, `namespace "implicit-global" (global)`}},
				{name: "elsewhere the base is unchanged", attrs: podReader("alice", nil, "other"),
					want: []string{`RoleBinding "readers"`}},
			},
		},
		{
			name: "(d) a local overlay replacing an unlocked base's roleRef: only what both roles grant",
			objs: []runtime.Object{
				namespace(global), namespace("tenant"),
				roleBinding(global, "readers", clusterRoleRef("view"), subjects(user("both"))),
				roleBinding("tenant", "readers", clusterRoleRef("edit"), subjects(user("both")), overlay),
			},
			views: []view{
				{namespace: "tenant", name: "readers", subjects: subjects(user("both")), roleRef: clusterRoleRef("edit"), overlays: "tenant/readers"},
			},
			checks: []check{
				{name: "a verb both grant", attrs: podReader("both", nil, "tenant"), want: []string{`RoleBinding "readers"`}},
				{name: "a verb only the local roleRef grants", attrs: with(podReader("both", nil, "tenant"), "create")},
			},
		},
		{
			name: "(d) a local overlay's Role of the same name does not widen",
			objs: []runtime.Object{
				namespace(global), namespace("tenant"),
				role(global, "reader", rule("get", "", "pods")),
				role("tenant", "reader", rule("*", "*", "*")),
				roleBinding(global, "readers", roleRef("reader"), subjects(user("alice"))),
				roleBinding("tenant", "readers", roleRef("reader"), subjects(user("alice")), overlay),
			},
			views: []view{
				{namespace: "tenant", name: "readers", subjects: subjects(user("alice")), roleRef: roleRef("reader"), overlays: "tenant/readers"},
			},
			checks: []check{
				{name: "what the global Role grants", attrs: podReader("alice", nil, "tenant"), want: []string{`RoleBinding "readers"`}},
				{name: "not what only the tenant's Role grants", attrs: with(podReader("alice", nil, "tenant"), "delete")},
			},
		},
		{
			name: "(e) no overlays: unchanged",
			objs: []runtime.Object{
				namespace(global), namespace("tenant"), namespace("shadowing"),
				roleBinding(global, "readers", clusterRoleRef("view"), subjects(user("alice"))),
				// Without the annotation a lower object of the same name shadows.
				roleBinding("shadowing", "readers", clusterRoleRef("view"), subjects(user("alice"))),
			},
			views: []view{
				{namespace: "tenant", name: "readers", subjects: subjects(user("alice")), roleRef: clusterRoleRef("view")},
			},
			checks: []check{
				{name: "inherited binding grants", attrs: podReader("alice", nil, "tenant"),
					want: []string{`RoleBinding "readers"`, `namespace "implicit-global" (global)`, "ClusterRole view"}},
				{name: "shadowed by a local binding: RBAC's", attrs: podReader("alice", nil, "shadowing")},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, tc.objs...)
			f.mux.SetMergeOptions(rolebindings, merge.Options{Strategy: tc.strategy, Overlayer: ov})
			for _, v := range tc.views {
				checkView(t, f.mux, v.namespace, v.name, v.subjects, v.roleRef, v.overlays)
			}
			for _, c := range tc.checks {
				got := f.authorize(t, c.attrs)
				if got.Allowed != (c.want != nil) {
					t.Errorf("%s: Authorize(%+v) = %+v, want allowed %v", c.name, c.attrs, got, c.want != nil)
					continue
				}
				for _, w := range c.want {
					if !strings.Contains(got.Reason, w) {
						t.Errorf("%s: reason %q does not mention %q", c.name, got.Reason, w)
					}
				}
				if !got.Allowed && got.Reason != "" {
					t.Errorf("%s: no opinion with a reason %q", c.name, got.Reason)
				}
			}
		})
	}
}

// checkView fails the test unless namespace's view shows binding name with
// subjects and roleRef, merged from overlays ("" for none).
func checkView(t *testing.T, m *watchmux.Mux, namespace, name string, subjects []rbacv1.Subject, ref rbacv1.RoleRef, overlays string) {
	t.Helper()
	var (
		res   merge.Result
		found bool
	)
	if _, err := m.Read(func(r watchmux.Reader) {
		for _, x := range r.Results(rolebindings, namespace, name) {
			res, found = x, true
		}
	}); err != nil {
		t.Fatalf("reading the view of %s: %v", namespace, err)
	}
	if !found {
		t.Fatalf("view of %s has no RoleBinding %q", namespace, name)
	}
	obj := res.Object
	if obj == nil {
		obj = res.Item.Object
	}
	rb, ok := obj.(*rbacv1.RoleBinding)
	if !ok {
		t.Fatalf("view of %s: %s is %T, want *rbacv1.RoleBinding", namespace, name, obj)
	}
	if !reflect.DeepEqual(rb.Subjects, subjects) || rb.RoleRef != ref {
		t.Errorf("view of %s shows %s with subjects %+v and roleRef %+v, want %+v and %+v", namespace, name, rb.Subjects, rb.RoleRef, subjects, ref)
	}
	if got := res.OverlaySources(); got != overlays {
		t.Errorf("view of %s: %s merged from overlays %q, want %q", namespace, name, got, overlays)
	}
}

// TestAuthorizeOverlayChanges: an overlay added or removed above the
// request's namespace or in it changes the cached decisions at once.
func TestAuthorizeOverlayChanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()},
		namespace(global), namespace("org"), namespace("team", parent("org")),
		roleBinding(global, "readers", clusterRoleRef("view"), subjects(user("alice"))),
	)
	f.mux.SetMergeOptions(rolebindings, merge.Options{Overlayer: testfixture.RoleBindingOverlayer(t)})
	orgOverlay := roleBinding("org", "readers", clusterRoleRef("view"), subjects(user("bob")), overlay)
	teamOverlay := roleBinding("team", "readers", clusterRoleRef("view"), subjects(user("bob"), user("carol")), overlay)

	steps := []struct {
		name    string
		deleted bool
		objs    []runtime.Object
		// allowed is who may get pods in team after the step; the others
		// of alice, bob and carol get no opinion.
		allowed []string
	}{
		{name: "the global binding alone", allowed: []string{"alice"}},
		{name: "a parent's overlay replaces the subjects", objs: []runtime.Object{orgOverlay}, allowed: []string{"bob"}},
		{name: "a local overlay adds a subject: not granted", objs: []runtime.Object{teamOverlay}, allowed: []string{"bob"}},
		{name: "the local overlay deleted", deleted: true, objs: []runtime.Object{teamOverlay}, allowed: []string{"bob"}},
		{name: "the parent's overlay deleted", deleted: true, objs: []runtime.Object{orgOverlay}, allowed: []string{"alice"}},
	}
	for _, s := range steps {
		apply(f.mux, s.deleted, s.objs...)
		for _, u := range []string{"alice", "bob", "carol"} {
			want := false
			for _, a := range s.allowed {
				want = want || a == u
			}
			// Twice: the second answer may come from the cache.
			for range 2 {
				got := f.authorize(t, podReader(u, nil, "team"))
				if got.Allowed != want {
					t.Fatalf("%s: %s: Authorize = %+v, want allowed %v", s.name, u, got, want)
				}
				if want && !strings.Contains(got.Reason, `RoleBinding "readers"`) {
					t.Errorf("%s: %s: reason %q does not name the binding", s.name, u, got.Reason)
				}
			}
		}
	}
}
