package authz_test

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

// quotaUpdate asks to update a ResourceQuota in namespace, as user.
func quotaUpdate(user, namespace string) authz.Attributes {
	return authz.Attributes{User: user, Namespace: namespace, Verb: "update", Resource: "resourcequotas", Name: "compute"}
}

// configMapReader asks to get a ConfigMap in namespace, as user.
func configMapReader(user, namespace string) authz.Attributes {
	return authz.Attributes{User: user, Namespace: namespace, Verb: "get", Resource: "configmaps", Name: "settings"}
}

// TestAuthorizeRoleResolution: an inherited binding's Role resolves as RBAC
// resolves it where the binding is written (DESIGN.md, "Enforcing
// inherited RoleBindings"): the real Role of that name in the binding's own
// source namespace, never one that namespace only sees in its view (a global
// Role, a locked one, a staged candidate). Each step changes the sources,
// then decides every check twice (the second answer may come from the
// cache).
func TestAuthorizeRoleResolution(t *testing.T) {
	t.Parallel()
	type check struct {
		attrs authz.Attributes
		// want is the substrings of the reason when allowed; nil: no opinion.
		want []string
	}
	type step struct {
		name    string
		deleted bool
		objs    []runtime.Object
		checks  []check
	}
	// The org: a global Role quota-admin, alice's namespace p with a child c.
	org := []runtime.Object{
		namespace(global), namespace("p"), namespace("c", parent("p")),
		role(global, "quota-admin", rule("update", "", "resourcequotas")),
	}
	aliceQuotaAdmin := roleBinding("p", "mine", roleRef("quota-admin"), subjects(user("alice")))
	harmless := role("p", "quota-admin", rule("get", "", "configmaps"))
	tests := []struct {
		name  string
		objs  []runtime.Object
		steps []step
	}{
		{
			// Issue 24, item 2: alice binds a harmless Role of her own to
			// herself (RBAC's escalation check passes), then deletes it.
			name: "a parent binding whose real Role was deleted grants nothing",
			objs: org,
			steps: []step{
				{name: "the harmless Role bound", objs: []runtime.Object{harmless, aliceQuotaAdmin}, checks: []check{
					{attrs: configMapReader("alice", "c"), want: []string{`RoleBinding "mine"`, `namespace "p" (parent)`, "Role p/quota-admin"}},
					{attrs: quotaUpdate("alice", "c")},
				}},
				{name: "the Role deleted: the global one of that name is not the binding's", deleted: true, objs: []runtime.Object{harmless}, checks: []check{
					{attrs: configMapReader("alice", "c")},
					{attrs: quotaUpdate("alice", "c")},
				}},
				{name: "a Role of that name created again in p", objs: []runtime.Object{role("p", "quota-admin", rule("update", "", "resourcequotas"))}, checks: []check{
					{attrs: quotaUpdate("alice", "c"), want: []string{"Role p/quota-admin"}},
				}},
			},
		},
		{
			name: "a global binding resolves the global namespace's real Role",
			objs: append(org[:len(org):len(org)],
				roleBinding(global, "quota-admins", roleRef("quota-admin"), subjects(user("gus")))),
			steps: []step{
				{name: "in a tenant and below it", checks: []check{
					{attrs: quotaUpdate("gus", "p"), want: []string{`RoleBinding "quota-admins"`, "Role implicit-global/quota-admin"}},
					{attrs: quotaUpdate("gus", "c"), want: []string{"Role implicit-global/quota-admin"}},
				}},
				{name: "a tenant's Role of that name changes nothing", objs: []runtime.Object{role("p", "quota-admin", rule("*", "*", "*"))}, checks: []check{
					{attrs: quotaUpdate("gus", "c"), want: []string{"Role implicit-global/quota-admin"}},
					{attrs: configMapReader("gus", "c")},
				}},
				{name: "the global Role deleted", deleted: true, objs: []runtime.Object{role(global, "quota-admin")}, checks: []check{
					{attrs: quotaUpdate("gus", "c")},
				}},
			},
		},
		{
			// The locked global Role wins p's view, so p's own Role is in no
			// view; a change of it changes no view, yet the binding
			// resolves it: the cache must see it.
			name: "a locked global Role of the same name does not stand in for the parent's",
			objs: []runtime.Object{
				namespace(global), namespace("p"), namespace("c", parent("p")),
				lockedRole(global, "quota-admin", rule("update", "", "resourcequotas")),
				harmless, aliceQuotaAdmin,
			},
			steps: []step{
				{name: "the parent's real Role grants", checks: []check{
					{attrs: configMapReader("alice", "c"), want: []string{"Role p/quota-admin"}},
					{attrs: quotaUpdate("alice", "c")},
				}},
				{name: "the parent's real Role narrows", objs: []runtime.Object{role("p", "quota-admin", rule("list", "", "configmaps"))}, checks: []check{
					{attrs: configMapReader("alice", "c")},
					{attrs: quotaUpdate("alice", "c")},
				}},
			},
		},
		{
			name: "a Role candidate staged in the parent does not change what its binding resolves",
			objs: []runtime.Object{
				namespace(global), namespace("p", stage("canary")), namespace("c", parent("p"), stage("canary")),
				role("p", "reader", rule("get", "", "configmaps")),
				roleBinding("p", "readers", roleRef("reader"), subjects(user("alice"))),
				roleBinding("p", "creators", roleRef("creator"), subjects(user("carl"))),
			},
			steps: []step{
				{name: "the candidates staged", objs: []runtime.Object{
					withMeta(role("p", "reader-next", rule("*", "*", "*")), candidateFor("reader", v1alpha1.LabelStage+"=canary")),
					withMeta(role("p", "creator-next", rule("*", "*", "*")), candidateFor("creator", v1alpha1.LabelStage+"=canary")),
				}, checks: []check{
					{attrs: configMapReader("alice", "c"), want: []string{"Role p/reader"}},
					{attrs: quotaUpdate("alice", "c")},
					// A staged creation: p has no real Role creator yet.
					{attrs: quotaUpdate("carl", "c")},
					{attrs: configMapReader("carl", "c")},
				}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, tc.objs...)
			for _, s := range tc.steps {
				apply(f.mux, s.deleted, s.objs...)
				for _, c := range s.checks {
					for range 2 {
						got := f.authorize(t, c.attrs)
						if got.Allowed != (c.want != nil) {
							t.Fatalf("%s: Authorize(%+v) = %+v, want allowed %v", s.name, c.attrs, got, c.want != nil)
						}
						for _, w := range c.want {
							if !strings.Contains(got.Reason, w) {
								t.Errorf("%s: reason %q does not mention %q", s.name, got.Reason, w)
							}
						}
					}
				}
			}
		})
	}
}

// lockedRole returns a new locked Role object.
func lockedRole(namespace, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return withMeta(role(namespace, name, rules...), locked)
}

// withMeta applies opts to a new Role object's metadata.
func withMeta(r *rbacv1.Role, opts ...objOpt) *rbacv1.Role {
	for _, o := range opts {
		o(&r.ObjectMeta)
	}
	return r
}
