package authz_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// The ClusterRoles of the test cluster.
func testClusterRoles() []*rbacv1.ClusterRole {
	return []*rbacv1.ClusterRole{
		clusterRole("view", rule("get,list,watch", "", "pods,configmaps")),
		clusterRole("edit", rule("get,list,watch,create,update,patch,delete", "", "pods,configmaps")),
		clusterRole("admin", rule("*", "*", "*")),
	}
}

// world is an org: the global namespace with its bindings, a tenant, an
// org tree (org-1 > team-x > dev > feature, and team-y beside team-x), and
// one namespace per thing a tenant may try, each named after it.
func world() []runtime.Object {
	return []runtime.Object{
		namespace(global),
		namespace("kube-system"),
		namespace("team-a"),
		namespace("team-b"),
		namespace("opted-out", noInherit),
		namespace("org-1"),
		namespace("org-1-team-x", parent("org-1")),
		namespace("org-1-team-x-dev", parent("org-1-team-x")),
		namespace("org-1-team-x-dev-feature", parent("org-1-team-x-dev")),
		namespace("org-1-team-y", parent("org-1")),
		namespace("excluding", exclude("rolebindings/global-viewers,rolebindings/global-locked-editors")),
		namespace("excluding-child", parent("excluding")),
		namespace("shadowing"),
		namespace("escalation"),
		// The test sets the parent label directly; in a cluster the
		// admission guard allows it only to who may update org-1-team-x.
		namespace("reparented", parent("org-1-team-x")),
		namespace("spoofing"),

		// Global sources.
		role(global, "global-role", rule("get", "", "pods")),
		roleBinding(global, "global-viewers", clusterRoleRef("view"), []rbacv1.Subject{group("viewers")}),
		roleBinding(global, "global-locked-editors", clusterRoleRef("edit"), []rbacv1.Subject{user("eve")}, locked),
		roleBinding(global, "global-role-binding", roleRef("global-role"), []rbacv1.Subject{user("rita")}),
		roleBinding(global, "global-sa", clusterRoleRef("edit"), []rbacv1.Subject{sa("", "ci"), sa("tools", "deployer")}),
		roleBinding(global, "global-missing-clusterrole", clusterRoleRef("does-not-exist"), []rbacv1.Subject{user("mo")}),
		roleBinding(global, "global-missing-role", roleRef("does-not-exist"), []rbacv1.Subject{user("rex")}),
		roleBinding(global, "global-foreign-roleref", rbacv1.RoleRef{APIGroup: "example.com", Kind: "ClusterRole", Name: "admin"},
			[]rbacv1.Subject{user("bob")}),

		// Parent sources.
		roleBinding("org-1", "org-1-viewers", clusterRoleRef("view"), []rbacv1.Subject{group("org-1")}),
		roleBinding("org-1", "org-1-global-role", roleRef("global-role"), []rbacv1.Subject{user("gina")}),
		role("org-1-team-x", "team-x-reader", rule("get", "", "secrets")),
		roleBinding("org-1-team-x", "team-x-editors", clusterRoleRef("edit"), []rbacv1.Subject{group("team-x")}),
		roleBinding("org-1-team-x", "team-x-readers", roleRef("team-x-reader"), []rbacv1.Subject{user("ross")}),

		// What tenants write.
		role("org-1-team-x-dev", "team-x-reader", rule("*", "", "secrets")),
		roleBinding("shadowing", "global-viewers", clusterRoleRef("view"), []rbacv1.Subject{group("others")}),
		roleBinding("shadowing", "global-locked-editors", clusterRoleRef("edit"), []rbacv1.Subject{user("mallory")}),
		role("escalation", "global-role", rule("*", "*", "*")),
		roleBinding("spoofing", "spoof", clusterRoleRef("admin"), []rbacv1.Subject{user("alice")},
			label(v1alpha1.LabelScope, string(merge.ScopeGlobal)), label(v1alpha1.LabelSourceNamespace, global)),
		roleBinding("team-a", "local-admins", clusterRoleRef("admin"), []rbacv1.Subject{user("lou")}),
	}
}

// TestAuthorize decides requests in the world: each row is one question a
// requester or a tenant may try.
func TestAuthorize(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, world()...)
	viewers := []string{"system:authenticated", "viewers"}
	bot := func(ns, name string) string { return "system:serviceaccount:" + ns + ":" + name }
	mod := func(a authz.Attributes, change func(*authz.Attributes)) authz.Attributes { change(&a); return a }

	tests := []struct {
		name  string
		attrs authz.Attributes
		// want is the substrings of the reason when allowed; nil: no opinion.
		want []string
	}{
		{name: "global binding to a ClusterRole grants in a tenant", attrs: podReader("alice", viewers, "team-a"),
			want: []string{`RoleBinding "global-viewers"`, `namespace "implicit-global" (global)`, "ClusterRole view"}},
		{name: "not in the global namespace: kube-apiserver's RBAC decides there", attrs: podReader("alice", viewers, global)},
		{name: "not in an excluded namespace", attrs: podReader("alice", viewers, "kube-system")},
		{name: "not in a namespace labeled inherit=false", attrs: podReader("alice", viewers, "opted-out")},
		{name: "not in a namespace that does not exist", attrs: podReader("alice", viewers, "ghost")},
		{name: "verb the ClusterRole lacks", attrs: with(podReader("alice", viewers, "team-a"), "delete")},
		{name: "resource the ClusterRole lacks", attrs: mod(podReader("alice", viewers, "team-a"), func(a *authz.Attributes) { a.Resource = "secrets" })},
		{name: "subresource the ClusterRole lacks", attrs: mod(podReader("alice", viewers, "team-a"), func(a *authz.Attributes) { a.Subresource = "log" })},
		{name: "requester no binding names", attrs: podReader("nobody", []string{"system:authenticated"}, "team-a")},
		{name: "a cluster-scoped request: no namespace", attrs: podReader("alice", viewers, "")},

		{name: "parent binding grants in a child", attrs: podReader("olga", []string{"org-1"}, "org-1-team-x"),
			want: []string{`RoleBinding "org-1-viewers"`, `namespace "org-1" (parent)`}},
		{name: "parent binding grants in a grandchild", attrs: podReader("olga", []string{"org-1"}, "org-1-team-x-dev-feature"),
			want: []string{`RoleBinding "org-1-viewers"`, `namespace "org-1" (parent)`}},
		{name: "parent binding grants in its whole subtree", attrs: with(podReader("tom", []string{"team-x"}, "org-1-team-x-dev-feature"), "create"),
			want: []string{`RoleBinding "team-x-editors"`, `namespace "org-1-team-x" (parent)`, "ClusterRole edit"}},
		{name: "parent binding does not grant in a sibling", attrs: with(podReader("tom", []string{"team-x"}, "org-1-team-y"), "create")},
		{name: "parent binding does not grant above", attrs: with(podReader("tom", []string{"team-x"}, "org-1"), "create")},
		{name: "parent binding is local in its own namespace", attrs: with(podReader("tom", []string{"team-x"}, "org-1-team-x"), "create")},
		{name: "parent binding does not grant in another tenant", attrs: podReader("olga", []string{"org-1"}, "team-a")},

		{name: "local binding never grants", attrs: podReader("lou", nil, "team-a")},

		{name: "global binding to a global Role", attrs: podReader("rita", nil, "team-a"),
			want: []string{`RoleBinding "global-role-binding"`, "Role implicit-global/global-role"}},
		{name: "ESCALATION: a tenant's Role of the same name does not widen a global binding", attrs: with(podReader("rita", nil, "escalation"), "delete")},
		{name: "ESCALATION: the global Role still applies beside the tenant's", attrs: podReader("rita", nil, "escalation"),
			want: []string{"Role implicit-global/global-role"}},
		{name: "parent binding to a parent Role", attrs: mod(podReader("ross", nil, "org-1-team-x-dev"), func(a *authz.Attributes) { a.Resource = "secrets" }),
			want: []string{`RoleBinding "team-x-readers"`, "Role org-1-team-x/team-x-reader"}},
		{name: "ESCALATION: a child's Role of the same name does not widen a parent binding",
			attrs: mod(podReader("ross", nil, "org-1-team-x-dev"), func(a *authz.Attributes) { a.Resource, a.Verb = "secrets", "delete" })},
		// RBAC resolves a Role in the binding's own namespace: org-1 has no
		// real Role global-role, only the global one in its view.
		{name: "ESCALATION: a parent binding to a Role the parent only inherits grants nothing", attrs: podReader("gina", nil, "org-1-team-x")},

		{name: "a local binding of the same name narrows: the inherited one leaves the view", attrs: podReader("alice", viewers, "shadowing")},
		{name: "the shadowing local binding does not grant either", attrs: podReader("oscar", []string{"others"}, "shadowing")},
		{name: "a locked inherited binding can't be shadowed: it still grants", attrs: with(podReader("eve", nil, "shadowing"), "create"),
			want: []string{`RoleBinding "global-locked-editors"`}},
		{name: "the blocked shadow does not grant", attrs: with(podReader("mallory", nil, "shadowing"), "create")},

		{name: "an exclusion removes the grant", attrs: podReader("alice", viewers, "excluding")},
		{name: "an exclusion removes the grant below too", attrs: podReader("alice", viewers, "excluding-child")},
		{name: "a locked binding can't be excluded", attrs: with(podReader("eve", nil, "excluding"), "create"),
			want: []string{`RoleBinding "global-locked-editors"`}},
		{name: "a locked binding can't be excluded from above", attrs: with(podReader("eve", nil, "excluding-child"), "create"),
			want: []string{`RoleBinding "global-locked-editors"`}},

		// Authorize trusts the mux's view: the parent label is the admission
		// guard's to police (setting it needs update on the parent).
		{name: "a parent label set on a namespace brings the parent's bindings", attrs: with(podReader("tom", []string{"team-x"}, "reparented"), "create"),
			want: []string{`RoleBinding "team-x-editors"`, `namespace "org-1-team-x" (parent)`}},

		{name: "provenance labels don't make a local binding inherited", attrs: podReader("alice", nil, "spoofing")},

		{name: "ServiceAccount without a namespace: the viewing namespace's", attrs: podReader(bot("team-a", "ci"), nil, "team-a"),
			want: []string{`RoleBinding "global-sa"`}},
		{name: "ServiceAccount without a namespace: not another tenant's", attrs: podReader(bot("team-b", "ci"), nil, "team-a")},
		{name: "ServiceAccount without a namespace: not the global namespace's", attrs: podReader(bot(global, "ci"), nil, "team-a")},
		{name: "ServiceAccount with a namespace, in one tenant", attrs: podReader(bot("tools", "deployer"), nil, "team-a"),
			want: []string{`RoleBinding "global-sa"`}},
		{name: "ServiceAccount with a namespace, in another", attrs: podReader(bot("tools", "deployer"), nil, "team-b"),
			want: []string{`RoleBinding "global-sa"`}},

		{name: "missing ClusterRole", attrs: podReader("mo", nil, "team-a")},
		{name: "missing Role", attrs: podReader("rex", nil, "team-a")},
		{name: "roleRef of another API group", attrs: podReader("bob", nil, "team-a")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := f.authorize(t, tc.attrs)
			if got.Allowed != (tc.want != nil) {
				t.Fatalf("Authorize(%+v) = %+v, want allowed %v", tc.attrs, got, tc.want != nil)
			}
			for _, w := range tc.want {
				if !strings.Contains(got.Reason, w) {
					t.Errorf("reason %q does not mention %q", got.Reason, w)
				}
			}
			if !got.Allowed && got.Reason != "" {
				t.Errorf("no opinion with a reason %q", got.Reason)
			}
			// Asked again, the answer comes from the cache and is the same.
			if again := f.authorize(t, tc.attrs); again != got {
				t.Errorf("asked again: %+v, want %+v", again, got)
			}
		})
	}
}

// TestAuthorizeNotSynced: before the mux has read its sources, every answer
// is an error, never a decision.
func TestAuthorizeNotSynced(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles(), unsynced: true}, world()...)
	d, err := f.authz.Authorize(podReader("alice", []string{"viewers"}, "team-a"))
	if !watchmux.IsNotSynced(err) {
		t.Fatalf("Authorize before sync: err = %v, want not synced", err)
	}
	if d.Allowed {
		t.Errorf("Authorize before sync allowed: %+v", d)
	}
	f.mux.MarkSynced()
	if d := f.authorize(t, podReader("alice", []string{"viewers"}, "team-a")); !d.Allowed {
		t.Errorf("Authorize after sync = %+v, want allowed", d)
	}
}

// TestAuthorizeCache: a repeated question is answered without reading the
// views, changes elsewhere keep the answer cached, and a change that could
// alter it is seen at once.
func TestAuthorizeCache(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, world()...)
	alice := podReader("alice", []string{"viewers"}, "org-1-team-x")
	reads := func(t *testing.T, want int64) {
		t.Helper()
		if got := f.views.reads.Load(); got != want {
			t.Fatalf("views read %d times, want %d", got, want)
		}
	}
	allowed := func(t *testing.T, want bool) {
		t.Helper()
		if got := f.authorize(t, alice); got.Allowed != want {
			t.Fatalf("Authorize(%+v) = %+v, want allowed %v", alice, got, want)
		}
	}

	allowed(t, true)
	reads(t, 1)
	allowed(t, true)
	reads(t, 1)

	// Another request is another key.
	f.authorize(t, podReader("alice", []string{"viewers"}, "team-a"))
	reads(t, 2)
	allowed(t, true)
	reads(t, 2)

	// Changes outside org-1-team-x's lineage keep the cached answer.
	apply(f.mux, false,
		roleBinding("team-b", "local", clusterRoleRef("admin"), []rbacv1.Subject{user("alice")}),
		role("team-b", "local", rule("get", "", "pods")),
		namespace("team-b", exclude("rolebindings/*")),
		namespace("org-2"),
		namespace("org-2-team", parent("org-2")),
		roleBinding("org-2", "org-2-viewers", clusterRoleRef("view"), []rbacv1.Subject{group("org-2")}),
		roleBinding("org-1-team-y", "sibling", clusterRoleRef("view"), []rbacv1.Subject{group("viewers")}),
		roleBinding("org-1-team-x-dev", "child", clusterRoleRef("view"), []rbacv1.Subject{group("viewers")}),
	)
	allowed(t, true)
	reads(t, 2)

	// A change in the namespace, an ancestor or the global namespace may
	// alter the answer: it is decided again.
	for i, change := range []runtime.Object{
		role("org-1-team-x", "another", rule("get", "", "pods")),
		roleBinding("org-1", "another", clusterRoleRef("view"), []rbacv1.Subject{group("nobody")}),
		role(global, "another", rule("get", "", "pods")),
		namespace("org-1", exclude("roles/another")),
	} {
		apply(f.mux, false, change)
		allowed(t, true)
		reads(t, int64(3+i))
		allowed(t, true)
		reads(t, int64(3+i))
	}

	// A namespace change that changes no view (an exclusion of nothing it
	// inherits) changes no generation: the answer stays cached.
	apply(f.mux, false, namespace("org-1", exclude("roles/another,roles/nothing-of-that-name")))
	allowed(t, true)
	reads(t, 6)
}

// TestAuthorizeSourceChanges: every change of a source a decision read is
// seen by the next decision, cached or not.
func TestAuthorizeSourceChanges(t *testing.T) {
	t.Parallel()
	viewers := []string{"viewers"}
	tests := []struct {
		name string
		// attrs is decided (and cached) before change, then after it.
		attrs         authz.Attributes
		before, after bool
		change        func(m *watchmux.Mux)
	}{
		{
			name:  "deleting the global binding revokes at once",
			attrs: podReader("alice", viewers, "team-a"), before: true, after: false,
			change: func(m *watchmux.Mux) {
				apply(m, true, roleBinding(global, "global-viewers", clusterRoleRef("view"), nil))
			},
		},
		{
			name:  "a global binding's subjects change",
			attrs: podReader("alice", viewers, "team-a"), before: true, after: false,
			change: func(m *watchmux.Mux) {
				apply(m, false, roleBinding(global, "global-viewers", clusterRoleRef("view"), []rbacv1.Subject{group("others")}))
			},
		},
		{
			name:  "a global binding's roleRef changes",
			attrs: with(podReader("alice", viewers, "team-a"), "delete"), before: false, after: true,
			change: func(m *watchmux.Mux) {
				apply(m, false, roleBinding(global, "global-viewers", clusterRoleRef("edit"), []rbacv1.Subject{group("viewers")}))
			},
		},
		{
			name:  "a global Role widens",
			attrs: with(podReader("rita", nil, "team-a"), "delete"), before: false, after: true,
			change: func(m *watchmux.Mux) {
				apply(m, false, role(global, "global-role", rule("get,delete", "", "pods")))
			},
		},
		{
			name:  "a global Role narrows",
			attrs: podReader("rita", nil, "escalation"), before: true, after: false,
			change: func(m *watchmux.Mux) {
				apply(m, false, role(global, "global-role", rule("list", "", "pods")))
			},
		},
		{
			name:  "a global Role is deleted",
			attrs: podReader("rita", nil, "team-a"), before: true, after: false,
			change: func(m *watchmux.Mux) { apply(m, true, role(global, "global-role")) },
		},
		{
			name:   "a parent Role changes",
			attrs:  authz.Attributes{User: "ross", Namespace: "org-1-team-x-dev-feature", Verb: "list", Resource: "secrets"},
			before: false, after: true,
			change: func(m *watchmux.Mux) {
				apply(m, false, role("org-1-team-x", "team-x-reader", rule("get,list", "", "secrets")))
			},
		},
		{
			name:  "the parent creates the Role its binding names",
			attrs: with(podReader("gina", nil, "org-1-team-y"), "delete"), before: false, after: true,
			change: func(m *watchmux.Mux) {
				apply(m, false, role("org-1", "global-role", rule("get,delete", "", "pods")))
			},
		},
		{
			name:  "an exclusion on the namespace removes the grant",
			attrs: podReader("alice", viewers, "team-a"), before: true, after: false,
			change: func(m *watchmux.Mux) { apply(m, false, namespace("team-a", exclude("rolebindings/global-viewers"))) },
		},
		{
			name:  "an exclusion on an ancestor removes the grant",
			attrs: podReader("alice", viewers, "org-1-team-x-dev-feature"), before: true, after: false,
			change: func(m *watchmux.Mux) { apply(m, false, namespace("org-1", exclude("rolebindings/*"))) },
		},
		{
			name:  "an exclusion does not remove a locked binding",
			attrs: with(podReader("eve", nil, "team-a"), "create"), before: true, after: true,
			change: func(m *watchmux.Mux) { apply(m, false, namespace("team-a", exclude("rolebindings/*"))) },
		},
		{
			name:  "a local binding shadows the inherited one",
			attrs: podReader("alice", viewers, "team-a"), before: true, after: false,
			change: func(m *watchmux.Mux) {
				apply(m, false, roleBinding("team-a", "global-viewers", clusterRoleRef("view"), []rbacv1.Subject{group("viewers")}))
			},
		},
		{
			name:  "a local binding can't shadow a locked one",
			attrs: with(podReader("eve", nil, "team-a"), "create"), before: true, after: true,
			change: func(m *watchmux.Mux) {
				apply(m, false, roleBinding("team-a", "global-locked-editors", clusterRoleRef("view"), []rbacv1.Subject{user("nobody")}))
			},
		},
		{
			name:  "inherit=false withdraws every inherited grant",
			attrs: with(podReader("eve", nil, "team-a"), "create"), before: true, after: false,
			change: func(m *watchmux.Mux) { apply(m, false, namespace("team-a", noInherit)) },
		},
		{
			// The admission guard lets only who may update org-1-team-x
			// set this label: Authorize follows the view.
			name:  "a parent label brings the parent's bindings",
			attrs: with(podReader("tom", []string{"team-x"}, "team-a"), "create"), before: false, after: true,
			change: func(m *watchmux.Mux) { apply(m, false, namespace("team-a", parent("org-1-team-x"))) },
		},
		{
			name:  "re-parenting an ancestor",
			attrs: podReader("olga", []string{"org-1"}, "org-1-team-x-dev"), before: true, after: false,
			change: func(m *watchmux.Mux) { apply(m, false, namespace("org-1-team-x", parent("team-b"))) },
		},
		{
			name:  "a namespace created",
			attrs: podReader("alice", viewers, "new"), before: false, after: true,
			change: func(m *watchmux.Mux) { apply(m, false, namespace("new")) },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, world()...)
			for range 2 {
				if got := f.authorize(t, tc.attrs); got.Allowed != tc.before {
					t.Fatalf("before: Authorize(%+v) = %+v, want allowed %v", tc.attrs, got, tc.before)
				}
			}
			tc.change(f.mux)
			if got := f.authorize(t, tc.attrs); got.Allowed != tc.after {
				t.Fatalf("after: Authorize(%+v) = %+v, want allowed %v", tc.attrs, got, tc.after)
			}
		})
	}
}

// TestAuthorizeClusterRoleChanges: a ClusterRole change reaches the
// authorizer through its informer and makes every cached decision
// unreachable, whichever namespace it was made in.
func TestAuthorizeClusterRoleChanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, world()...)
	del := with(podReader("alice", []string{"viewers"}, "team-a"), "delete")
	get := podReader("alice", []string{"viewers"}, "team-a")
	for range 2 {
		if d := f.authorize(t, del); d.Allowed {
			t.Fatalf("delete before the change: %+v", d)
		}
		if d := f.authorize(t, get); !d.Allowed {
			t.Fatalf("get before the change: %+v", d)
		}
	}
	reads := f.views.reads.Load()

	// Widen.
	f.updateClusterRole(t, clusterRole("view", rule("get,list,watch,delete", "", "pods")))
	f.eventually(t, del, true)
	if f.views.reads.Load() == reads {
		t.Error("the decision after the change was not made again")
	}

	// Narrow.
	f.updateClusterRole(t, clusterRole("view", rule("list", "", "pods")))
	f.eventually(t, get, false)
	f.eventually(t, del, false)

	// Delete, then create again.
	if err := f.client.RbacV1().ClusterRoles().Delete(context.Background(), "view", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting ClusterRole view: %v", err)
	}
	list := with(get, "list")
	f.eventually(t, list, false)
	if _, err := f.client.RbacV1().ClusterRoles().Create(context.Background(), clusterRole("view", rule("list", "", "pods")), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ClusterRole view: %v", err)
	}
	f.eventually(t, list, true)

	// A binding to a ClusterRole that did not exist grants once it does.
	mo := podReader("mo", nil, "team-a")
	if d := f.authorize(t, mo); d.Allowed {
		t.Fatalf("binding to a missing ClusterRole: %+v", d)
	}
	if _, err := f.client.RbacV1().ClusterRoles().Create(context.Background(), clusterRole("does-not-exist", rule("get", "", "pods")), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ClusterRole: %v", err)
	}
	f.eventually(t, mo, true)
}

// TestAuthorizeSmallCache: a decision evicted from a full cache is made
// again, the same.
func TestAuthorizeSmallCache(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles(), cacheSize: 2}, world()...)
	asks := []authz.Attributes{
		podReader("alice", []string{"viewers"}, "team-a"),
		podReader("alice", []string{"viewers"}, "team-b"),
		podReader("alice", []string{"viewers"}, "org-1-team-x"),
	}
	for round := range 3 {
		for _, a := range asks {
			if d := f.authorize(t, a); !d.Allowed {
				t.Fatalf("round %d: Authorize(%+v) = %+v", round, a, d)
			}
		}
	}
	// Three keys in a cache of two, asked in turn: LRU misses every time.
	if got := f.views.reads.Load(); got != 9 {
		t.Errorf("views read %d times, want 9", got)
	}
}

// TestAuthorizeClusterRoleResync: an informer resync of unchanged
// ClusterRoles is no change: cached decisions stay reachable.
func TestAuthorizeClusterRoleResync(t *testing.T) {
	t.Parallel()
	// One second is the shortest resync period client-go honours.
	f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles(), resync: time.Second}, world()...)
	var resyncs atomic.Int64
	if _, err := f.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(any, any) { resyncs.Add(1) },
	}); err != nil {
		t.Fatalf("AddEventHandler: %v", err)
	}
	alice := podReader("alice", []string{"viewers"}, "team-a")
	if d := f.authorize(t, alice); !d.Allowed {
		t.Fatalf("Authorize(%+v) = %+v", alice, d)
	}
	// Two rounds of resyncs: the authorizer's handler has seen the first.
	rounds := int64(2 * len(testClusterRoles()))
	testwait.For(t, fmt.Sprintf("%d resync updates", rounds), func() bool { return resyncs.Load() >= rounds })
	if d := f.authorize(t, alice); !d.Allowed {
		t.Fatalf("Authorize(%+v) = %+v", alice, d)
	}
	if got := f.views.reads.Load(); got != 1 {
		t.Errorf("views read %d times across ClusterRole resyncs, want 1: a resync invalidated the cache", got)
	}
}

// TestAuthorizeCacheKeyIsExact: two requests that differ only in how their
// groups split never share a cached decision. Group names are whatever the
// authenticator (an OIDC claim, an impersonation header) says.
func TestAuthorizeCacheKeyIsExact(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, world()...)
	member := podReader("alice", []string{"x", "viewers"}, "team-a")
	if d := f.authorize(t, member); !d.Allowed {
		t.Fatalf("Authorize(%+v) = %+v, want allowed", member, d)
	}
	for _, groups := range [][]string{
		{"x\x01viewers"},
		{"x\x00viewers"},
		{"x", "viewers\x00"},
	} {
		other := podReader("alice", groups, "team-a")
		if d := f.authorize(t, other); d.Allowed {
			t.Errorf("Authorize with groups %q = %+v: the decision for groups %q was reused", groups, d, member.Groups)
		}
	}
	for _, other := range []authz.Attributes{
		{User: "alice\x00x\x01viewers", Namespace: "team-a", Verb: "get", Resource: "pods", Name: "web"},
		{User: "alice", Groups: []string{"x", "viewers"}, Namespace: "team-a", Verb: "get", Resource: "pods\x00", Name: "web"},
		{User: "alice", Groups: []string{"x", "viewers"}, Namespace: "team-a", Verb: "get", Resource: "pods", Subresource: "\x00web"},
	} {
		if d := f.authorize(t, other); d.Allowed {
			t.Errorf("Authorize(%q) = %+v: the decision of another request was reused", fmt.Sprintf("%+v", other), d)
		}
	}
}

// TestAuthorizeConcurrentChanges decides while the sources change, under
// -race: once the changes stop, every answer is the current one.
func TestAuthorizeConcurrentChanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, world()...)
	asks := []authz.Attributes{
		podReader("alice", []string{"viewers"}, "team-a"),
		podReader("alice", []string{"viewers"}, "org-1-team-x-dev"),
		podReader("rita", nil, "team-b"),
		with(podReader("tom", []string{"team-x"}, "org-1-team-x-dev-feature"), "create"),
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := f.authz.Authorize(asks[i%len(asks)]); err != nil {
					t.Errorf("Authorize: %v", err)
					return
				}
			}
		}()
	}
	for i := range 200 {
		on := i%2 == 0
		apply(f.mux, !on,
			roleBinding(global, "global-viewers", clusterRoleRef("view"), []rbacv1.Subject{group("viewers")}),
			role(global, "global-role", rule("get", "", "pods")),
			roleBinding("org-1-team-x", "team-x-editors", clusterRoleRef("edit"), []rbacv1.Subject{group("team-x")}),
		)
	}
	close(stop)
	wg.Wait()
	// The last round (i = 199) deleted them all.
	for _, a := range asks {
		if d := f.authorize(t, a); d.Allowed {
			t.Errorf("after the sources were deleted: Authorize(%+v) = %+v", a, d)
		}
	}
}
