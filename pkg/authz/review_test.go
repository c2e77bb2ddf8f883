package authz_test

import (
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

// TestRulesFor: the listing of a user's inherited rules names each binding
// that grants them, its scope and the role it resolves to, exactly the
// bindings Authorize decides with: a Role resolved in the binding's own
// namespace only (never one that namespace inherits), local bindings left
// to RBAC, bindings of other subjects left out (issue 26, point 2).
func TestRulesFor(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{clusterRoles: []*rbacv1.ClusterRole{
		clusterRole("admin", rule("get,create", rbacv1.GroupName, "rolebindings")),
		clusterRole("view", rule("get,list", "", "pods")),
	}},
		namespace(global), namespace("org"), namespace("team-a", parent("org")),
		roleBinding(global, "all-view", clusterRoleRef("view"), []rbacv1.Subject{group("system:authenticated")}),
		roleBinding("org", "platform-admins", clusterRoleRef("admin"), []rbacv1.Subject{group("platform:admins")}),
		role("org", "deployer", rule("create", "apps", "deployments")),
		roleBinding("org", "deployers", roleRef("deployer"), []rbacv1.Subject{user("dana")}),
		// global's Role, which org only inherits: org's binding resolves nothing.
		role(global, "secret-reader", rule("get", "", "secrets")),
		roleBinding("org", "secret-readers", roleRef("secret-reader"), []rbacv1.Subject{user("dana")}),
		roleBinding("org", "sam-view", clusterRoleRef("view"), []rbacv1.Subject{user("sam")}),
		roleBinding("team-a", "local-admin", clusterRoleRef("admin"), []rbacv1.Subject{user("dana")}),
	)
	groups := []string{"platform:admins", "system:authenticated"}
	got, err := f.authz.RulesFor("dana", groups, "team-a")
	if err != nil {
		t.Fatalf("RulesFor: %v", err)
	}
	type binding struct{ namespace, name, scope, role string }
	var bindings []binding
	for _, b := range got {
		bindings = append(bindings, binding{b.Namespace, b.Name, b.Scope, b.Role.Kind + " " + b.Role.Namespace + "/" + b.Role.Name})
	}
	want := []binding{
		{global, "all-view", "global", "ClusterRole /view"},
		{"org", "deployers", "parent", "Role org/deployer"},
		{"org", "platform-admins", "parent", "ClusterRole /admin"},
	}
	if !sameElements(bindings, want) {
		t.Fatalf("RulesFor bindings = %v, want %v", bindings, want)
	}
	// What is listed is what Authorize allows, and the binding it names.
	for _, b := range got {
		for _, r := range b.Rules {
			attrs := authz.Attributes{User: "dana", Groups: groups, Namespace: "team-a", Verb: r.Verbs[0], APIGroup: r.APIGroups[0], Resource: r.Resources[0], Name: "x"}
			if d := f.authorize(t, attrs); !d.Allowed {
				t.Errorf("listed rule %+v of %s/%s: Authorize(%+v) = %+v, want allowed", r, b.Namespace, b.Name, attrs, d)
			}
		}
	}
	secrets := authz.Attributes{User: "dana", Groups: groups, Namespace: "team-a", Verb: "get", Resource: "secrets", Name: "x"}
	if d := f.authorize(t, secrets); d.Allowed {
		t.Errorf("the unlisted inherited Role's rule: %+v, want no opinion", d)
	}
	// The rules are copies: changing them changes no later answer.
	got[0].Rules[0].Verbs[0] = "delete"
	again, err := f.authz.RulesFor("dana", groups, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(again[0].Rules, got[0].Rules) {
		t.Errorf("RulesFor shares its rules with the informers: %+v", again[0].Rules)
	}
	if none, err := f.authz.RulesFor("nobody", nil, "team-a"); err != nil || len(none) != 0 {
		t.Errorf("RulesFor(nobody) = %+v, %v; want nothing", none, err)
	}
}

// TestRulesForUnsynced: before the sources are read the listing fails, as
// Authorize does.
func TestRulesForUnsynced(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{unsynced: true})
	if _, err := f.authz.RulesFor("dana", nil, "team-a"); err == nil {
		t.Fatal("RulesFor before sync: want an error")
	}
}

func sameElements[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	count := map[T]int{}
	for _, x := range a {
		count[x]++
	}
	for _, x := range b {
		count[x]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}
