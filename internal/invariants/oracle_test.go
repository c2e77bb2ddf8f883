package invariants

import (
	"fmt"
	"math/rand/v2"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// The grants oracle: what the inherited bindings of a namespace's view
// would grant as real RBAC objects in that namespace, written from RBAC's
// documented semantics (https://kubernetes.io/docs/reference/access-authn-authz/rbac/),
// not from pkg/authz. Each binding's roleRef resolves as RBAC resolves it
// where the binding is written: a ClusterRole, or the real Role of that
// name in the binding's own source namespace, never a Role that namespace
// only inherits (DESIGN.md, "Enforcing inherited RoleBindings").
//
// Deliberate exceptions, where the product is stricter than RBAC:
//   - a rule with resourceNames never allows a request without a name (RBAC
//     allows one for resourceNames [""]);
//   - a binding the namespace overlays with an object of its own grants
//     only what it grants without that overlay too: the namespace's own
//     object is kube-apiserver's RBAC's to judge.
// Out of the model: the verbs bind and escalate (delegation), and
// non-resource requests.

// probe is one question the check asks of every tenant namespace.
type probe struct {
	verb, group, resource, subresource, name string
}

var probes = []probe{
	{verb: "get", resource: "pods", name: "web"},
	{verb: "list", resource: "pods"},
	{verb: "get", resource: "pods", subresource: "log", name: "web"},
	{verb: "update", resource: "resourcequotas", name: "q"},
	{verb: "get", resource: "secrets", name: "s"},
	{verb: "list", resource: "secrets"},
	{verb: "unlock", group: rbacv1.GroupName, resource: rolebindings, name: "g-lock"},
	{verb: "create", group: rbacv1.GroupName, resource: rolebindings},
	{verb: "stage", resource: "namespaces", name: "$ns"},
	{verb: "delete", resource: "configmaps", name: "c"},
}

type requester struct {
	user   string
	groups []string
}

func requesters(namespace string) []requester {
	return []requester{
		{user: "alice", groups: []string{"tenants", "system:authenticated"}},
		{user: "bob", groups: []string{"tenants", "system:authenticated"}},
		{user: "eve", groups: []string{"system:authenticated"}},
		{user: "system:serviceaccount:" + namespace + ":default", groups: []string{"system:serviceaccounts"}},
		{user: "system:serviceaccount:p:robot", groups: []string{"system:serviceaccounts"}},
	}
}

// checkGrants compares the authorization webhook's answer with the oracle's
// in every tenant namespace, for every probe and requester when sample is
// nil, else for those sample picks (a wrong grant stays in the state until
// a change removes it, so a sample finds it a few ops later).
func (h *harness) checkGrants(sample *rand.Rand) {
	type question struct {
		ns string
		rq requester
		p  probe
	}
	var qs []question
	var want []bool
	var why [][]string
	h.readTruth(func(r watchmux.Reader) {
		for _, ns := range r.Namespaces() {
			if !r.Lineage(ns).Tenant {
				continue
			}
			bindings := r.Results(rolebindings, ns, "")
			for _, rq := range requesters(ns) {
				for _, p := range probes {
					if sample != nil && sample.IntN(4) != 0 {
						continue
					}
					if p.name == "$ns" {
						p.name = ns
					}
					ok, via := h.oracleGrants(r, ns, bindings, rq, p)
					qs = append(qs, question{ns, rq, p})
					want = append(want, ok)
					why = append(why, via)
				}
			}
		}
	})
	for i, q := range qs {
		d, err := h.authz.Authorize(authz.Attributes{User: q.rq.user, Groups: q.rq.groups, Namespace: q.ns, Verb: q.p.verb,
			APIGroup: q.p.group, Resource: q.p.resource, Subresource: q.p.subresource, Name: q.p.name})
		if err != nil {
			h.violate(invHarness, "", "authorizing: %v", err)
			return
		}
		if d.Allowed == want[i] {
			continue
		}
		item := ""
		if h.roleRefKindRole(q.ns) {
			item = "2"
		}
		h.violateState(fmt.Sprintf("grants %s %v %v", q.ns, q.rq, q.p), invGrants, item, "in namespace %s, %s %s %s/%s %q: the authorization webhook says %v (%s), inherited bindings as real RBAC objects say %v %v",
			q.ns, q.rq.user, q.p.verb, q.p.resource, q.p.subresource, q.p.name, d.Allowed, d.Reason, want[i], why[i])
	}
}

// roleRefKindRole reports whether an inherited binding of namespace's view,
// or a layer of one from another namespace, names a Role.
func (h *harness) roleRefKindRole(namespace string) (found bool) {
	h.readTruth(func(r watchmux.Reader) {
		for _, v := range r.Results(rolebindings, namespace, "") {
			if v.Scope == merge.ScopeLocal {
				continue
			}
			for _, o := range []any{viewObject(v), v.Item.Object} {
				if rb, ok := o.(*rbacv1.RoleBinding); ok && rb.RoleRef.Kind == "Role" {
					found = true
				}
			}
			for _, it := range v.Overlays {
				if rb, ok := it.Object.(*rbacv1.RoleBinding); ok && it.Namespace != namespace && rb.RoleRef.Kind == "Role" {
					found = true
				}
			}
		}
	})
	return found
}

// oracleGrants answers one question from the inherited bindings.
func (h *harness) oracleGrants(r watchmux.Reader, namespace string, bindings []merge.Result, rq requester, p probe) (bool, []string) {
	for _, v := range bindings {
		if v.Scope == merge.ScopeLocal {
			continue // kube-apiserver's own RBAC decides the namespace's own bindings
		}
		ok, via := h.bindingGrants(v, namespace, rq, p)
		if !ok {
			continue
		}
		if localOverlay(v, namespace) {
			inh, found := r.Inherited(rolebindings, namespace, v.Item.Name)
			if !found {
				continue
			}
			if ok, _ := h.bindingGrants(inh, namespace, rq, p); !ok {
				continue
			}
		}
		return true, []string{via}
	}
	return false, nil
}

func localOverlay(v merge.Result, namespace string) bool {
	for _, o := range v.Overlays {
		if o.Namespace == namespace {
			return true
		}
	}
	return false
}

// bindingGrants reports whether the view item v, a RoleBinding read as a
// real one in namespace, grants the request.
func (h *harness) bindingGrants(v merge.Result, namespace string, rq requester, p probe) (bool, string) {
	rb, ok := viewObject(v).(*rbacv1.RoleBinding)
	if !ok || rb.RoleRef.APIGroup != rbacv1.GroupName {
		return false, ""
	}
	applies := false
	for _, s := range rb.Subjects {
		if appliesTo(s, rq, namespace) {
			applies = true
		}
	}
	if !applies {
		return false, ""
	}
	var rules []rbacv1.PolicyRule
	var via string
	switch rb.RoleRef.Kind {
	case "ClusterRole":
		for _, cr := range clusterRoles {
			if cr.Name == rb.RoleRef.Name {
				rules, via = cr.Rules, "ClusterRole "+cr.Name
			}
		}
	case "Role":
		ns := roleRefNamespace(v)
		if st, ok := h.w.objs[key{roles, ns, rb.RoleRef.Name}]; ok {
			if role, ok := st.obj.(*rbacv1.Role); ok {
				rules, via = role.Rules, "Role "+ns+"/"+role.Name
			}
		}
	}
	for _, rule := range rules {
		if allows(rule, p) {
			return true, fmt.Sprintf("binding %s/%s via %s", v.Item.Namespace, v.Item.Name, via)
		}
	}
	return false, ""
}

// roleRefNamespace is where the binding whose roleRef the view item shows
// is written: roleRef is set by every layer, so it is the topmost locked
// layer's (no layer below may change a field it sets), or else the nearest
// layer's (a lower scope's value wins).
func roleRefNamespace(v merge.Result) string {
	layers := append([]merge.Item{v.Item}, v.Overlays...)
	for _, l := range layers {
		if l.Locked {
			return l.Namespace
		}
	}
	return layers[len(layers)-1].Namespace
}

// appliesTo is RBAC's subject matching: a ServiceAccount subject without a
// namespace means one in the binding's namespace.
func appliesTo(s rbacv1.Subject, rq requester, namespace string) bool {
	switch s.Kind {
	case rbacv1.UserKind:
		return s.Name == rq.user
	case rbacv1.GroupKind:
		for _, g := range rq.groups {
			if g == s.Name {
				return true
			}
		}
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = namespace
		}
		return rq.user == "system:serviceaccount:"+ns+":"+s.Name
	}
	return false
}

// allows is RBAC's rule matching for a resource request: verbs, API groups
// and resources (with "*", "resource/subresource" and "*/subresource"),
// then resourceNames.
func allows(rule rbacv1.PolicyRule, p probe) bool {
	in := func(xs []string, x string) bool {
		for _, s := range xs {
			if s == x {
				return true
			}
		}
		return false
	}
	if !in(rule.Verbs, p.verb) && !in(rule.Verbs, "*") {
		return false
	}
	if !in(rule.APIGroups, p.group) && !in(rule.APIGroups, "*") {
		return false
	}
	res := p.resource
	if p.subresource != "" {
		res += "/" + p.subresource
	}
	if !in(rule.Resources, res) && !in(rule.Resources, "*") && !(p.subresource != "" && in(rule.Resources, "*/"+p.subresource)) {
		return false
	}
	if len(rule.ResourceNames) == 0 {
		return true
	}
	if p.name == "" {
		return false // the product's exception: RBAC allows "" for resourceNames [""]
	}
	return in(rule.ResourceNames, p.name)
}
