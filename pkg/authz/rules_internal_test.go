package authz

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// The reference for these tables is kube-apiserver's RBAC authorizer, which
// the product must not import:
//
//   - k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/rbac.go, RuleAllows:
//     for a resource request, VerbMatches && APIGroupMatches &&
//     ResourceMatches(rule, resource+"/"+subresource, subresource) &&
//     ResourceNameMatches; NonResourceURLMatches only for non-resource
//     requests.
//   - k8s.io/kubernetes/pkg/apis/rbac/v1/evaluation_helpers.go, the four
//     matchers: "*" is the only wildcard of verbs, groups and resources;
//     "*/<subresource>" matches that subresource of any resource; a rule
//     with resourceNames allows only a request naming one of them.
//   - k8s.io/kubernetes/pkg/registry/rbac/validation/rule.go, appliesToUser:
//     User by name, Group by membership, ServiceAccount by
//     "system:serviceaccount:<ns>:<name>" with the subject's namespace
//     defaulting to the binding's namespace; any other kind never applies.
//   - k8s.io/component-helpers/auth/rbac/validation (policy_comparator.go),
//     the rule-coverage helpers of escalation checks: seen as a rule of one
//     verb, one group, one resource and its name if it has one, a request is
//     allowed by a rule exactly when ruleCovers(rule, request) holds
//     (has(Verbs, "*") or the verb; the group likewise; resourceCoversAll
//     with "*" and "*/<subresource>"; and for resourceNames: a request
//     without a name is covered only by a rule without resourceNames). That
//     last point is where DESIGN.md asks request matching to be strict.

func TestRuleAllows(t *testing.T) {
	t.Parallel()
	get := func(group, resource, subresource, name string) Attributes {
		return Attributes{Verb: "get", APIGroup: group, Resource: resource, Subresource: subresource, Name: name}
	}
	withVerb := func(a Attributes, verb string) Attributes { a.Verb = verb; return a }
	podsRule := rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"pods"}}

	tests := []struct {
		name  string
		rule  rbacv1.PolicyRule
		attrs Attributes
		want  bool
	}{
		// Verbs: VerbMatches.
		{name: "verb listed", rule: podsRule, attrs: get("", "pods", "", "web"), want: true},
		{name: "verb listed, second", rule: podsRule, attrs: withVerb(get("", "pods", "", ""), "list"), want: true},
		{name: "verb not listed", rule: podsRule, attrs: withVerb(get("", "pods", "", "web"), "delete"), want: false},
		{name: "verb * allows any verb", rule: rbacv1.PolicyRule{Verbs: []string{"*"}, APIGroups: []string{""}, Resources: []string{"pods"}},
			attrs: withVerb(get("", "pods", "", "web"), "escalate"), want: true},
		{name: "verb is case-sensitive", rule: rbacv1.PolicyRule{Verbs: []string{"GET"}, APIGroups: []string{""}, Resources: []string{"pods"}},
			attrs: get("", "pods", "", "web"), want: false},
		{name: "no verbs allow nothing", rule: rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}},
			attrs: get("", "pods", "", "web"), want: false},

		// API groups: APIGroupMatches; "" is the core group.
		{name: "core group", rule: podsRule, attrs: get("", "pods", "", "web"), want: true},
		{name: "core rule, other group", rule: podsRule, attrs: get("example.com", "pods", "", "web"), want: false},
		{name: "named group, core request", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"apps"}, Resources: []string{"deployments"}},
			attrs: get("", "deployments", "", "web"), want: false},
		{name: "named group", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"apps"}, Resources: []string{"deployments"}},
			attrs: get("apps", "deployments", "", "web"), want: true},
		{name: "group * allows any group", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"deployments"}},
			attrs: get("apps", "deployments", "", "web"), want: true},
		{name: "group * allows the core group", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"pods"}},
			attrs: get("", "pods", "", "web"), want: true},
		{name: "no groups allow nothing", rule: rbacv1.PolicyRule{Verbs: []string{"*"}, Resources: []string{"*"}},
			attrs: get("", "pods", "", "web"), want: false},

		// Resources and subresources: ResourceMatches.
		{name: "resource * allows any resource", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"*"}},
			attrs: get("", "secrets", "", "s"), want: true},
		{name: "resource * allows subresources", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"*"}},
			attrs: get("", "pods", "log", "web"), want: true},
		{name: "pods does not allow pods/log", rule: podsRule, attrs: get("", "pods", "log", "web"), want: false},
		{name: "pods/log allows pods/log", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/log"}},
			attrs: get("", "pods", "log", "web"), want: true},
		{name: "pods/log does not allow pods", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/log"}},
			attrs: get("", "pods", "", "web"), want: false},
		{name: "pods/log does not allow pods/exec", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/log"}},
			attrs: get("", "pods", "exec", "web"), want: false},
		{name: "*/scale allows deployments/scale", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*/scale"}},
			attrs: get("apps", "deployments", "scale", "web"), want: true},
		{name: "*/scale does not allow deployments", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*/scale"}},
			attrs: get("apps", "deployments", "", "web"), want: false},
		{name: "*/scale does not allow pods/log", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*/scale"}},
			attrs: get("", "pods", "log", "web"), want: false},
		{name: "pods/* is no wildcard", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/*"}},
			attrs: get("", "pods", "log", "web"), want: false},
		{name: "resource is case-sensitive", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"Pods"}},
			attrs: get("", "pods", "", "web"), want: false},
		{name: "second resource listed", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps", "pods"}},
			attrs: get("", "pods", "", "web"), want: true},

		// resourceNames: ResourceNameMatches, and never an unnamed request.
		{name: "resourceNames, matching name", rule: rbacv1.PolicyRule{Verbs: []string{"get", "list", "create"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"db", "web"}},
			attrs: get("", "pods", "", "web"), want: true},
		{name: "resourceNames, other name", rule: rbacv1.PolicyRule{Verbs: []string{"get", "list", "create"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"db", "web"}},
			attrs: get("", "pods", "", "cache"), want: false},
		{name: "resourceNames, list without a name", rule: rbacv1.PolicyRule{Verbs: []string{"get", "list", "create"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"db", "web"}},
			attrs: withVerb(get("", "pods", "", ""), "list"), want: false},
		{name: "resourceNames, create without a name", rule: rbacv1.PolicyRule{Verbs: []string{"get", "list", "create"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"db", "web"}},
			attrs: withVerb(get("", "pods", "", ""), "create"), want: false},
		{name: "resourceNames, list with a metadata.name field selector", rule: rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"web"}},
			// kube-apiserver's RequestInfoFactory sets the name of a
			// list or watch from fieldSelector=metadata.name=web.
			attrs: withVerb(get("", "pods", "", "web"), "list"), want: true},
		// API validation accepts resourceNames [""], and kube-apiserver's
		// ResourceNameMatches then allows an unnamed request. DESIGN.md is
		// stricter, and so is the webhook (as component-helpers' ruleCovers):
		// a rule with resourceNames never allows a request without a name.
		{name: `resourceNames [""] never allow an unnamed request`, rule: rbacv1.PolicyRule{Verbs: []string{"list"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{""}},
			attrs: withVerb(get("", "pods", "", ""), "list"), want: false},
		{name: "resourceNames * is no wildcard", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{"*"}},
			attrs: get("", "pods", "", "web"), want: false},
		{name: "resourceNames apply to subresources", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/log"}, ResourceNames: []string{"web"}},
			attrs: get("", "pods", "log", "web"), want: true},
		{name: "no resourceNames allow any name and none", rule: podsRule, attrs: withVerb(get("", "pods", "", ""), "list"), want: true},

		// nonResourceURLs: only for non-resource requests, which never get here.
		{name: "nonResourceURLs-only rule, resource request", rule: rbacv1.PolicyRule{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
			attrs: get("", "pods", "", "web"), want: false},
		{name: "nonResourceURLs-only rule, path-like resource", rule: rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/api/*"}},
			attrs: get("", "healthz", "", ""), want: false},
		{name: "empty rule", rule: rbacv1.PolicyRule{}, attrs: get("", "pods", "", "web"), want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := ruleAllows(tc.attrs, tc.rule); got != tc.want {
				t.Errorf("ruleAllows(%+v, %+v) = %v, want %v", tc.attrs, tc.rule, got, tc.want)
			}
		})
	}
}

func TestSubjectMatches(t *testing.T) {
	t.Parallel()
	const viewing = "team-a"
	alice := Attributes{User: "alice", Groups: []string{"system:authenticated", "viewers"}}
	bot := func(ns, name string) Attributes {
		return Attributes{User: "system:serviceaccount:" + ns + ":" + name, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns}}
	}

	tests := []struct {
		name      string
		subject   rbacv1.Subject
		attrs     Attributes
		namespace string
		want      bool
	}{
		{name: "User by name", subject: rbacv1.Subject{Kind: rbacv1.UserKind, Name: "alice"}, attrs: alice, namespace: viewing, want: true},
		{name: "User, other name", subject: rbacv1.Subject{Kind: rbacv1.UserKind, Name: "bob"}, attrs: alice, namespace: viewing, want: false},
		{name: "User subject does not match a group", subject: rbacv1.Subject{Kind: rbacv1.UserKind, Name: "viewers"}, attrs: alice, namespace: viewing, want: false},
		{name: "Group by membership", subject: rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "viewers"}, attrs: alice, namespace: viewing, want: true},
		{name: "Group, not a member", subject: rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "admins"}, attrs: alice, namespace: viewing, want: false},
		{name: "Group subject does not match a user name", subject: rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "alice"}, attrs: alice, namespace: viewing, want: false},
		{name: "Group, no groups", subject: rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "viewers"}, attrs: Attributes{User: "alice"}, namespace: viewing, want: false},

		{name: "ServiceAccount with a namespace", subject: rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "tools", Name: "deployer"},
			attrs: bot("tools", "deployer"), namespace: viewing, want: true},
		{name: "ServiceAccount with a namespace, other namespace", subject: rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "tools", Name: "deployer"},
			attrs: bot(viewing, "deployer"), namespace: viewing, want: false},
		{name: "ServiceAccount with a namespace, other name", subject: rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "tools", Name: "deployer"},
			attrs: bot("tools", "builder"), namespace: viewing, want: false},
		{name: "ServiceAccount without a namespace is the viewing namespace's", subject: rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "ci"},
			attrs: bot(viewing, "ci"), namespace: viewing, want: true},
		{name: "ServiceAccount without a namespace, not the global namespace's", subject: rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "ci"},
			attrs: bot("implicit-global", "ci"), namespace: viewing, want: false},
		{name: "ServiceAccount without a namespace, other tenant's", subject: rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "ci"},
			attrs: bot("team-b", "ci"), namespace: viewing, want: false},
		{name: "ServiceAccount without any namespace", subject: rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "ci"},
			attrs: Attributes{User: "system:serviceaccount::ci"}, namespace: "", want: false},
		{name: "ServiceAccount subject does not match a user of that name", subject: rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "ci"},
			attrs: Attributes{User: "ci"}, namespace: viewing, want: false},
		// appliesToUser would match "system:serviceaccount:team-a:" here;
		// API validation forbids a subject without a name, and no
		// ServiceAccount has an empty name: no opinion is the safe side.
		{name: "ServiceAccount without a name", subject: rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: ""},
			attrs: Attributes{User: "system:serviceaccount:team-a:"}, namespace: viewing, want: false},

		{name: "unknown kind", subject: rbacv1.Subject{Kind: "Robot", Name: "alice"}, attrs: alice, namespace: viewing, want: false},
		{name: "kind is case-sensitive", subject: rbacv1.Subject{Kind: "user", Name: "alice"}, attrs: alice, namespace: viewing, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := subjectMatches(tc.attrs, tc.subject, tc.namespace); got != tc.want {
				t.Errorf("subjectMatches(%+v, %+v, %q) = %v, want %v", tc.attrs, tc.subject, tc.namespace, got, tc.want)
			}
		})
	}
}
