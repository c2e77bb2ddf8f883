package invariants

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// Delegation (issue 26): kube-apiserver lets a RoleBinding be written when
// the authorizer allows the verb bind on its role; the authorization
// webhook answers bind from the requester's rules in the namespace, real
// plus inherited. The invariant: an actor can only ever grant through a
// binding what its own rules cover. checkDelegation asks the webhook bind
// for every role a binding in a tenant namespace may name, and whenever it
// allows, checks with the oracle's own coverage (written from RBAC's
// documented semantics, not from component-helpers) that every rule of
// the role is covered by one of the requester's. The product may be
// stricter (it answers only for who inherits a binding there); it may not
// be looser.

// bindTarget is a role a binding in a namespace may name.
type bindTarget struct{ kind, name string }

var bindTargets = []bindTarget{
	{"ClusterRole", "view"}, {"ClusterRole", "edit"}, {"ClusterRole", "admin"},
	{"Role", "quota-admin"}, {"Role", "r"},
}

func (h *harness) checkDelegation() {
	type question struct {
		ns string
		rq requester
		t  bindTarget
	}
	var qs []question
	var covered []bool
	h.readTruth(func(r watchmux.Reader) {
		for _, ns := range r.Namespaces() {
			if !r.Lineage(ns).Tenant {
				continue
			}
			bindings := r.Results(rolebindings, ns, "")
			for _, rq := range requesters(ns) {
				owned := h.rulesIn(ns, bindings, rq)
				for _, t := range bindTargets {
					qs = append(qs, question{ns, rq, t})
					covered = append(covered, coversAll(owned, h.roleRules(ns, t)))
				}
			}
		}
	})
	for i, q := range qs {
		resource := "clusterroles"
		if q.t.kind == "Role" {
			resource = "roles"
		}
		d, err := h.authz.Authorize(authz.Attributes{User: q.rq.user, Groups: q.rq.groups, Namespace: q.ns, Verb: "bind",
			APIGroup: rbacv1.GroupName, Resource: resource, Name: q.t.name})
		if err != nil {
			h.violate(invHarness, "", "authorizing bind: %v", err)
			return
		}
		if d.Allowed && !covered[i] {
			h.violateState(fmt.Sprintf("delegation %s %v %v", q.ns, q.rq, q.t), invGrants, "26",
				"in namespace %s, %s may bind %s %s (%s), but its own rules there, real plus inherited, don't cover that role's",
				q.ns, q.rq.user, q.t.kind, q.t.name, d.Reason)
		}
	}
}

// rulesIn are rq's rules in namespace ns: those of the namespace's own
// RoleBindings as they are written (kube-apiserver's RBAC reads the real
// objects, whatever the view shows under their names) and those of the
// inherited bindings of its view, each role resolved where its binding is
// written.
func (h *harness) rulesIn(ns string, bindings []merge.Result, rq requester) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	add := func(rb *rbacv1.RoleBinding, where string) {
		if rb.RoleRef.APIGroup != rbacv1.GroupName {
			return
		}
		for _, s := range rb.Subjects {
			if appliesTo(s, rq, ns) {
				out = append(out, h.roleRules(where, bindTarget{rb.RoleRef.Kind, rb.RoleRef.Name})...)
				return
			}
		}
	}
	for k, st := range h.w.objs {
		if rb, ok := st.obj.(*rbacv1.RoleBinding); ok && k.resource == rolebindings && k.namespace == ns {
			add(rb, ns)
		}
	}
	for _, v := range bindings {
		if v.Scope == merge.ScopeLocal {
			continue
		}
		if rb, ok := viewObject(v).(*rbacv1.RoleBinding); ok {
			add(rb, roleRefNamespace(v))
		}
	}
	return out
}

// roleRules are the rules of a ClusterRole, or of the real Role of that
// name in namespace ns (none if it does not exist).
func (h *harness) roleRules(ns string, t bindTarget) []rbacv1.PolicyRule {
	if t.kind == "ClusterRole" {
		for _, cr := range clusterRoles {
			if cr.Name == t.name {
				return cr.Rules
			}
		}
		return nil
	}
	if st, ok := h.w.objs[key{roles, ns, t.name}]; ok {
		if role, ok := st.obj.(*rbacv1.Role); ok {
			return role.Rules
		}
	}
	return nil
}

// coversAll reports whether every rule of want is covered by owned: each
// verb, group, resource and name it names is allowed by one owned rule,
// a wildcard only by a wildcard.
func coversAll(owned, want []rbacv1.PolicyRule) bool {
	for _, w := range want {
		names := w.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, verb := range w.Verbs {
			for _, g := range w.APIGroups {
				for _, res := range w.Resources {
					for _, n := range names {
						p := probe{verb: verb, group: g, resource: res, name: n}
						if !anyAllows(owned, p, len(w.ResourceNames) == 0) {
							return false
						}
					}
				}
			}
		}
	}
	return true
}

// anyAllows reports whether one owned rule allows p; unnamed: the wanted
// rule names no resource, so only an owned rule naming none covers it.
func anyAllows(owned []rbacv1.PolicyRule, p probe, unnamed bool) bool {
	for _, o := range owned {
		if unnamed && len(o.ResourceNames) > 0 {
			continue
		}
		if unnamed {
			o.ResourceNames = nil
		}
		if allowsLiteral(o, p) {
			return true
		}
	}
	return false
}

// allowsLiteral is allows with the wanted side's wildcards taken as
// literal: "*" is covered only by "*".
func allowsLiteral(o rbacv1.PolicyRule, p probe) bool {
	in := func(xs []string, x string) bool {
		for _, s := range xs {
			if s == x || s == "*" {
				return true
			}
		}
		return false
	}
	if !in(o.Verbs, p.verb) || !in(o.APIGroups, p.group) {
		return false
	}
	if !in(o.Resources, p.resource) && !subresourceWildcard(o.Resources, p.resource) {
		return false
	}
	if len(o.ResourceNames) == 0 {
		return true
	}
	for _, n := range o.ResourceNames {
		if n == p.name {
			return true
		}
	}
	return false
}

// subresourceWildcard reports whether resources holds "*/sub" for
// resource "x/sub".
func subresourceWildcard(resources []string, resource string) bool {
	for i := 0; i < len(resource); i++ {
		if resource[i] == '/' {
			for _, r := range resources {
				if r == "*"+resource[i:] {
					return true
				}
			}
			return false
		}
	}
	return false
}
