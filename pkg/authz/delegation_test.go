package authz_test

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

// bind is kube-apiserver's binding check: may user bind role (resource
// roles or clusterroles) in a binding of namespace?
func bind(user, namespace, resource, role string) authz.Attributes {
	return authz.Attributes{User: user, Namespace: namespace, Verb: "bind", APIGroup: rbacv1.GroupName, Resource: resource, Name: role}
}

// TestAuthorizeDelegation: the webhook answers kube-apiserver's bind check
// as RBAC's escalation check would with the inherited rules counted (issue
// 26, point 1): allowed when the requester's rules in the namespace, real
// and inherited, cover every rule of the role, resolved as RBAC resolves a
// roleRef there; never escalate, never cluster-wide, never for a requester
// who inherits nothing there.
func TestAuthorizeDelegation(t *testing.T) {
	t.Parallel()
	pods := "pods,configmaps"
	clusterRoles := []*rbacv1.ClusterRole{
		clusterRole("view", rule("get,list,watch", "", pods)),
		clusterRole("edit", rule("get,list,watch,create,update,patch,delete", "", pods)),
		clusterRole("admin", rule("get,list,watch,create,update,patch,delete", "", pods),
			rule("get,list,watch,create,update,patch,delete", rbacv1.GroupName, "rolebindings,roles")),
		clusterRole("quota", rule("update", "", "resourcequotas")),
		clusterRole("view-and-quota", rule("get,list,watch", "", pods), rule("update", "", "resourcequotas")),
	}
	crbs := []*rbacv1.ClusterRoleBinding{{
		ObjectMeta: metav1.ObjectMeta{Name: "rita-quota"},
		RoleRef:    clusterRoleRef("quota"),
		Subjects:   []rbacv1.Subject{user("rita")},
	}}
	f := newFixture(t, fixtureOptions{clusterRoles: clusterRoles, clusterRoleBindings: crbs},
		namespace(global), namespace("org"), namespace("team-a", parent("org")), namespace("other"),
		roleBinding("org", "dana-admin", clusterRoleRef("admin"), []rbacv1.Subject{user("dana")}),
		roleBinding("org", "vic-view", clusterRoleRef("view"), []rbacv1.Subject{user("vic")}),
		roleBinding("org", "rita-view", clusterRoleRef("view"), []rbacv1.Subject{user("rita")}),
		role("org", "org-reader", rule("get", "", "pods")),
		// team-a's own: a Role, and vic may write RoleBindings there.
		role("team-a", "reader", rule("get", "", "pods")),
		role("team-a", "rb-writer", rule("create", rbacv1.GroupName, "rolebindings")),
		roleBinding("team-a", "vic-rb-writer", roleRef("rb-writer"), []rbacv1.Subject{user("vic")}),
		roleBinding("team-a", "lou-admin", clusterRoleRef("admin"), []rbacv1.Subject{user("lou")}),
	)
	for _, tc := range []struct {
		name  string
		attrs authz.Attributes
		// want is the substrings of the reason when allowed; nil: no opinion.
		want []string
	}{
		{name: "an inherited admin delegates view", attrs: bind("dana", "team-a", "clusterroles", "view"),
			want: []string{`RoleBinding "dana-admin" from namespace "org"`, "cover every rule of ClusterRole view"}},
		{name: "an inherited admin delegates edit", attrs: bind("dana", "team-a", "clusterroles", "edit"), want: []string{"ClusterRole edit"}},
		{name: "an inherited admin binds a real Role of the namespace", attrs: bind("dana", "team-a", "roles", "reader"), want: []string{"Role team-a/reader"}},
		{name: "not a Role the namespace only inherits", attrs: bind("dana", "team-a", "roles", "org-reader")},
		{name: "not a role with a rule the requester does not hold", attrs: bind("dana", "team-a", "clusterroles", "quota")},
		{name: "not in a namespace the requester inherits nothing in", attrs: bind("dana", "other", "clusterroles", "admin")},
		{name: "not in the parent: its bindings are RBAC's there", attrs: bind("dana", "org", "clusterroles", "view")},
		{name: "not a role that does not exist", attrs: bind("dana", "team-a", "clusterroles", "missing")},
		{name: "never escalate", attrs: with(bind("dana", "team-a", "clusterroles", "view"), "escalate")},
		{name: "never a cluster-scoped binding", attrs: bind("dana", "", "clusterroles", "view")},
		{name: "an inherited viewer with a real RoleBinding writer binds view", attrs: bind("vic", "team-a", "clusterroles", "view"),
			want: []string{`RoleBinding "vic-view"`}},
		{name: "but not edit", attrs: bind("vic", "team-a", "clusterroles", "edit")},
		{name: "real ClusterRoleBinding rules count beside the inherited ones", attrs: bind("rita", "team-a", "clusterroles", "view-and-quota"),
			want: []string{`RoleBinding "rita-view"`}},
		{name: "a requester with real rules only: RBAC's own check decides", attrs: bind("lou", "team-a", "clusterroles", "view")},
	} {
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
		})
	}
}

// TestAuthorizeDelegationFollowsChanges: a bind answer is never cached: it
// follows the real Role it resolves and the bindings it counts at once.
func TestAuthorizeDelegationFollowsChanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{clusterRoles: []*rbacv1.ClusterRole{clusterRole("edit", rule("get,list,create", "", "pods"))}},
		namespace(global), namespace("org"), namespace("team-a", parent("org")),
		roleBinding("org", "dana-edit", clusterRoleRef("edit"), []rbacv1.Subject{user("dana")}),
		role("team-a", "reader", rule("get", "", "pods")),
	)
	reader := bind("dana", "team-a", "roles", "reader")
	if got := f.authorize(t, reader); !got.Allowed {
		t.Fatalf("before: %+v, want allowed", got)
	}
	apply(f.mux, false, role("team-a", "reader", rule("get,delete", "", "pods")))
	if got := f.authorize(t, reader); got.Allowed {
		t.Fatalf("the Role widened past the requester's rules: %+v, want no opinion", got)
	}
	apply(f.mux, false, role("team-a", "reader", rule("get", "", "pods")))
	if got := f.authorize(t, reader); !got.Allowed {
		t.Fatalf("the Role narrowed again: %+v, want allowed", got)
	}
	apply(f.mux, true, roleBinding("org", "dana-edit", clusterRoleRef("edit"), nil))
	if got := f.authorize(t, reader); got.Allowed {
		t.Fatalf("the inherited binding deleted: %+v, want no opinion", got)
	}
}
