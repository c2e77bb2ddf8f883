package authz

import (
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// InheritedBinding is one inherited RoleBinding of a namespace's view that
// grants a user rules there, with the role it resolves to.
type InheritedBinding struct {
	// Namespace and Name are the binding's source.
	Namespace, Name string
	// Scope is the source's scope from the namespace: parent or global.
	Scope string
	// Candidate names the candidate the view shows in the binding's
	// place, if the namespace's stage selects one.
	Candidate string
	// Role is the role the binding's roleRef resolves to.
	Role ResolvedRole
	// Rules are the role's rules: what the binding grants.
	Rules []rbacv1.PolicyRule
}

// ResolvedRole names the role a binding resolves to: a ClusterRole, or the
// real Role in the binding's own source namespace.
type ResolvedRole struct {
	Kind, Namespace, Name string
}

// RulesFor lists the rules the inherited RoleBindings of namespace grant
// the user with groups, binding by binding in the view's order, each Role
// resolved as Authorize resolves it: the listing and the decisions read
// the same bindings with the same code (bindingRules), so what is listed
// is what the webhook allows. Local bindings are left out: they are
// kube-apiserver's RBAC's. err is set when the views can't be read yet.
func (a *Authorizer) RulesFor(user string, groups []string, namespace string) ([]InheritedBinding, error) {
	if namespace == "" {
		return nil, nil
	}
	attrs := Attributes{User: user, Groups: groups, Namespace: namespace}
	var out []InheritedBinding
	_, err := a.views.Read(func(r watchmux.Reader) { out = a.inheritedBindings(r, attrs) })
	// The rules are the informers' and the mirror's: the caller gets copies.
	for i := range out {
		rules := make([]rbacv1.PolicyRule, len(out[i].Rules))
		for j := range out[i].Rules {
			out[i].Rules[j].DeepCopyInto(&rules[j])
		}
		out[i].Rules = rules
	}
	return out, err
}
