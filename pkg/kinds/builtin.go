package kinds

import (
	"fmt"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// RoleBindings is the view of rbac.authorization.k8s.io/v1 rolebindings.
func RoleBindings() Kind {
	return Kind{
		typed:      true,
		Source:     rbacv1.SchemeGroupVersion.WithResource("rolebindings"),
		Kind:       "RoleBinding",
		Model:      "io.k8s.api.rbac.v1.RoleBinding",
		Singular:   "rolebinding",
		ShortNames: []string{"irb"},
		New:        func() runtime.Object { return &rbacv1.RoleBinding{} },
		NewList:    func() runtime.Object { return &rbacv1.RoleBindingList{} },
		Columns: []metav1.TableColumnDefinition{
			{Name: "Role", Type: "string", Description: "The role the binding grants: Role/<name> or ClusterRole/<name>."},
			{Name: "Subjects", Type: "string", Description: "The users, groups and service accounts the binding grants it to."},
		},
		Cells: func(obj runtime.Object) []any {
			rb := obj.(*rbacv1.RoleBinding)
			return []any{rb.RoleRef.Kind + "/" + rb.RoleRef.Name, subjects(rb.Subjects)}
		},
	}
}

// Roles is the view of rbac.authorization.k8s.io/v1 roles.
func Roles() Kind {
	return Kind{
		typed:      true,
		Source:     rbacv1.SchemeGroupVersion.WithResource("roles"),
		Kind:       "Role",
		Model:      "io.k8s.api.rbac.v1.Role",
		Singular:   "role",
		ShortNames: []string{"irole"},
		New:        func() runtime.Object { return &rbacv1.Role{} },
		NewList:    func() runtime.Object { return &rbacv1.RoleList{} },
		Columns: []metav1.TableColumnDefinition{
			{Name: "Rules", Type: "integer", Description: "The number of policy rules."},
		},
		Cells: func(obj runtime.Object) []any {
			return []any{int64(len(obj.(*rbacv1.Role).Rules))}
		},
	}
}

// NetworkPolicies is the view of networking.k8s.io/v1 networkpolicies.
func NetworkPolicies() Kind {
	return Kind{
		typed:      true,
		Source:     networkingv1.SchemeGroupVersion.WithResource("networkpolicies"),
		Kind:       "NetworkPolicy",
		Model:      "io.k8s.api.networking.v1.NetworkPolicy",
		Singular:   "networkpolicy",
		ShortNames: []string{"inetpol"},
		New:        func() runtime.Object { return &networkingv1.NetworkPolicy{} },
		NewList:    func() runtime.Object { return &networkingv1.NetworkPolicyList{} },
		Columns: []metav1.TableColumnDefinition{
			{Name: "Pod-Selector", Type: "string", Description: "The pods the policy selects."},
			{Name: "Policy-Types", Type: "string", Description: "Ingress, Egress or both."},
		},
		Cells: func(obj runtime.Object) []any {
			np := obj.(*networkingv1.NetworkPolicy)
			types := make([]string, 0, len(np.Spec.PolicyTypes))
			for _, t := range np.Spec.PolicyTypes {
				types = append(types, string(t))
			}
			return []any{selector(np.Spec.PodSelector), strings.Join(types, ",")}
		},
	}
}

// BuiltIns are the built-in kinds, served from their Go types from the
// start, each with the Replace strategy, the policy's global namespace and
// views only.
func BuiltIns() []Kind {
	return []Kind{RoleBindings(), Roles(), NetworkPolicies()}
}

// BuiltIn returns the built-in kind of source, if source is one.
func BuiltIn(source schema.GroupVersionResource) (Kind, bool) {
	for _, k := range BuiltIns() {
		if k.Source == source {
			return k, true
		}
	}
	return Kind{}, false
}

// Typed returns the kinds of ks served from their Go types, in order.
func Typed(ks []Kind) []Kind {
	var out []Kind
	for _, k := range ks {
		if k.Typed() {
			out = append(out, k)
		}
	}
	return out
}

// Resources are the view resources of ks, in order.
func Resources(ks []Kind) []string {
	out := make([]string, 0, len(ks))
	for _, k := range ks {
		out = append(out, k.Resource())
	}
	return out
}

// NewObjects are the Go types of the items of ks, by view resource.
func NewObjects(ks []Kind) map[string]func() runtime.Object {
	out := make(map[string]func() runtime.Object, len(ks))
	for _, k := range ks {
		out[k.Resource()] = k.New
	}
	return out
}

// subjects prints at most three subjects, then how many more, as kubectl does for long lists.
func subjects(ss []rbacv1.Subject) string {
	const shown = 3
	parts := make([]string, 0, shown+1)
	for i, s := range ss {
		if i == shown {
			parts = append(parts, fmt.Sprintf("+ %d more...", len(ss)-shown))
			break
		}
		name := s.Name
		if s.Kind == rbacv1.ServiceAccountKind && s.Namespace != "" {
			name = s.Namespace + "/" + s.Name
		}
		parts = append(parts, s.Kind+"/"+name)
	}
	return strings.Join(parts, ", ")
}

func selector(s metav1.LabelSelector) string {
	sel, err := metav1.LabelSelectorAsSelector(&s)
	if err != nil {
		return "<invalid>"
	}
	if sel.Empty() {
		return "<all pods>"
	}
	return sel.String()
}
