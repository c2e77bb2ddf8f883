package authz

import (
	"fmt"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/auth/rbac/validation"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// Delegation: kube-apiserver's RBAC lets a user write a RoleBinding when the
// authorizer chain allows verb bind on its role (resource roles or
// clusterroles of rbac.authorization.k8s.io, the role's name, the binding's
// namespace), or else when the role's rules are covered by the user's own
// real RBAC rules there, which know nothing of inheritance. The webhook
// answers the bind question as that second check would, with the inherited
// rules counted too: allowed when the requester's rules in the namespace,
// real and inherited, cover every rule of the role (RBAC's own Covers). An
// Allow makes kube-apiserver skip its own resolution, so the role is
// resolved here as RBAC resolves a roleRef: the ClusterRole, or the real
// Role in the binding's namespace. Never escalate (its request carries no
// rules, so covering can't be judged), never a cluster-scoped binding (no
// namespace), and only for a requester that inherits a binding there:
// without one, RBAC's own check decides alone.

// isBind reports whether attrs is kube-apiserver's binding check for a
// binding in a namespace.
func isBind(a Attributes) bool {
	return a.Verb == "bind" && a.APIGroup == rbacv1.GroupName && a.Subresource == "" && a.Name != "" &&
		a.Namespace != "" && (a.Resource == "roles" || a.Resource == "clusterroles")
}

// decideBind decides a bind request: an inherited rule granting bind
// itself, as for any verb, or else the coverage of the role's rules.
func (a *Authorizer) decideBind(r watchmux.Reader, attrs Attributes) Decision {
	return a.decideBindIn(r, attrs, actualView(r, attrs.Namespace))
}

// decideBindIn is decideBind over the bindings of v.
func (a *Authorizer) decideBindIn(r watchmux.Reader, attrs Attributes, v bindingView) Decision {
	if c := a.decideIn(r, attrs, v); c.d.Allowed {
		return c.d
	}
	var role []rbacv1.PolicyRule
	var what string
	switch attrs.Resource {
	case "clusterroles":
		cr, err := a.clusterRoles.Get(attrs.Name)
		if err != nil {
			return Decision{}
		}
		role, what = cr.Rules, "ClusterRole "+cr.Name
	case "roles":
		rl, _ := realRole(r, attrs.Namespace, attrs.Name, "")
		if rl == nil {
			return Decision{}
		}
		role, what = rl.Rules, fmt.Sprintf("Role %s/%s", attrs.Namespace, rl.Name)
	}
	inherited, from := a.inheritedRules(r, attrs, v)
	if len(from) == 0 {
		return Decision{}
	}
	owner := append(a.realRules(r, attrs), inherited...)
	if covered, _ := validation.Covers(owner, role); !covered {
		return Decision{}
	}
	return Decision{Allowed: true, Reason: fmt.Sprintf("implicit.dev: the requester's rules in namespace %q, real and inherited (%s), cover every rule of %s",
		attrs.Namespace, strings.Join(from, ", "), what)}
}

// inheritedRules returns the rules the inherited bindings of attrs.Namespace
// grant the requester (inheritedBindings), and the bindings they come from.
func (a *Authorizer) inheritedRules(r watchmux.Reader, attrs Attributes, v bindingView) ([]rbacv1.PolicyRule, []string) {
	var rules []rbacv1.PolicyRule
	var from []string
	for _, b := range a.inheritedBindingsIn(r, attrs, v) {
		rules = append(rules, b.Rules...)
		from = append(from, fmt.Sprintf("RoleBinding %q from namespace %q", b.Name, b.Namespace))
	}
	return rules, from
}

// inheritedBindings returns the inherited bindings of attrs.Namespace that
// grant the requester rules, each binding's Role resolved as Authorize
// resolves it. A binding the namespace overlays itself counts only when it
// grants the same without the overlay (the same subject and role):
// Authorize grants what both grant.
func (a *Authorizer) inheritedBindings(r watchmux.Reader, attrs Attributes) []InheritedBinding {
	return a.inheritedBindingsIn(r, attrs, actualView(r, attrs.Namespace))
}

// inheritedBindingsIn is inheritedBindings over the bindings of v.
func (a *Authorizer) inheritedBindingsIn(r watchmux.Reader, attrs Attributes, v bindingView) []InheritedBinding {
	var out []InheritedBinding
	var deps []roleVersion
	for _, res := range v.results {
		if res.Scope == merge.ScopeLocal {
			continue
		}
		g, ok := a.bindingRules(r, attrs, res, &deps)
		if !ok {
			continue
		}
		if hasLocalOverlay(res, attrs.Namespace) {
			inh, found := v.inherited(res.Item.Name)
			if !found {
				continue
			}
			if ig, ok := a.bindingRules(r, attrs, inh, &deps); !ok || ig.ref != g.ref {
				continue
			}
		}
		out = append(out, InheritedBinding{
			Namespace: res.Item.Namespace, Name: res.Item.Name, Scope: string(res.Scope), Candidate: res.Candidates(),
			Role: g.ref.RoleRef(), Rules: g.rules,
		})
	}
	return out
}

// resolvedRef names the role a binding resolved: its kind, namespace and name.
type resolvedRef struct{ kind, namespace, name string }

// RoleRef returns ref as a Role exported.
func (ref resolvedRef) RoleRef() ResolvedRole {
	return ResolvedRole{Kind: ref.kind, Namespace: ref.namespace, Name: ref.name}
}

// granted is what one binding grants the requester: the rules of the role
// it resolved, that role, and how a reason names it.
type granted struct {
	rules []rbacv1.PolicyRule
	ref   resolvedRef
	via   string
}

// bindingRules returns the rules the binding of a view item grants the
// requester, and the role they come from; false if it names no subject of
// the requester or its role does not resolve. Authorize decides with it,
// and RulesFor lists with it.
func (a *Authorizer) bindingRules(r watchmux.Reader, attrs Attributes, res merge.Result, deps *[]roleVersion) (granted, bool) {
	rb, ok := viewObject(res).(*rbacv1.RoleBinding)
	if !ok || rb.RoleRef.APIGroup != rbacv1.GroupName || !anySubject(attrs, rb.Subjects, attrs.Namespace) {
		return granted{}, false
	}
	ns, cluster := roleRefSource(res)
	rules, via := a.rules(r, rb, ns, cluster, deps)
	if via == "" {
		return granted{}, false
	}
	ref := resolvedRef{kind: rb.RoleRef.Kind, name: rb.RoleRef.Name}
	if ref.kind == "Role" {
		ref.namespace = ns
	}
	return granted{rules: rules, ref: ref, via: via}, true
}

// realRules returns the requester's real RBAC rules in attrs.Namespace, as
// kube-apiserver's RBAC resolves them: the ClusterRoleBindings' and the
// namespace's own RoleBindings' (candidates and bindings a lock keeps out of
// the view included: each is a real RoleBinding), with their roles resolved
// there.
func (a *Authorizer) realRules(r watchmux.Reader, attrs Attributes) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	crbs, err := a.clusterRoleBindings.List(labels.Everything())
	if err == nil {
		for _, crb := range crbs {
			if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.APIGroup != rbacv1.GroupName || !anySubject(attrs, crb.Subjects, "") {
				continue
			}
			if cr, err := a.clusterRoles.Get(crb.RoleRef.Name); err == nil {
				rules = append(rules, cr.Rules...)
			}
		}
	}
	var deps []roleVersion
	for _, it := range r.SourcesIn(resourceRoleBindings, attrs.Namespace) {
		rb, ok := it.Object.(*rbacv1.RoleBinding)
		if !ok || it.Cluster != "" || rb.RoleRef.APIGroup != rbacv1.GroupName || !anySubject(attrs, rb.Subjects, attrs.Namespace) {
			continue
		}
		got, _ := a.rules(r, rb, attrs.Namespace, "", &deps)
		rules = append(rules, got...)
	}
	return rules
}

// AllowsByRBAC reports whether the requester's real RBAC rules in
// attrs.Namespace (realRules: the ClusterRoleBindings' and the namespace's
// own RoleBindings', their roles resolved as RBAC resolves them) grant
// attrs, matched as kube-apiserver's RBAC authorizer matches them
// (ruleAllows): what kube-apiserver's own RBAC would answer from the objects
// the mirror and the ClusterRole caches hold. pkg/offline judges the
// guards' permission checks with it, beside Authorize, with no cluster.
func (a *Authorizer) AllowsByRBAC(attrs Attributes) (bool, error) {
	var allowed bool
	_, err := a.views.Read(func(r watchmux.Reader) {
		for _, rule := range a.realRules(r, attrs) {
			if ruleAllows(attrs, rule) {
				allowed = true
				return
			}
		}
	})
	return allowed, err
}
