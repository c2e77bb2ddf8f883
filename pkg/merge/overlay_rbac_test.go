package merge_test

import (
	"reflect"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

func roleBinding(namespace, name string, subjects ...string) *rbacv1.RoleBinding {
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + namespace), ResourceVersion: "3"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
	}
	for _, s := range subjects {
		rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: s})
	}
	return rb
}

func TestOverlayRoleBinding(t *testing.T) {
	t.Parallel()
	o := testfixture.RoleBindingOverlayer(t)
	editRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}
	withRef := func(rb *rbacv1.RoleBinding, ref rbacv1.RoleRef) *rbacv1.RoleBinding {
		rb.RoleRef = ref
		return rb
	}
	item := func(rb *rbacv1.RoleBinding, isLocked bool) merge.Item {
		return merge.Item{Namespace: rb.Namespace, Name: rb.Name, Locked: isLocked, Object: rb}
	}
	tests := []struct {
		name      string
		base      merge.Item
		overlays  []merge.Item
		want      *rbacv1.RoleBinding
		conflicts [][]string
	}{
		{
			name:     "subjects are atomic: replaced as a whole",
			base:     item(roleBinding(globalNS, "rb", "alice", "bob"), false),
			overlays: []merge.Item{item(roleBinding("team", "rb", "carol"), false)},
			want:     roleBinding(globalNS, "rb", "carol"),
		},
		{
			name:      "under a lock, replacing subjects is a conflict naming subjects",
			base:      item(roleBinding(globalNS, "rb", "alice", "bob"), true),
			overlays:  []merge.Item{item(roleBinding("team", "rb", "carol"), false)},
			want:      roleBinding(globalNS, "rb", "alice", "bob"),
			conflicts: [][]string{{"overlay by team/rb blocked at .subjects: set by locked " + globalNS + "/rb"}},
		},
		{
			name:     "a locked base without subjects gets the overlay's subjects",
			base:     item(roleBinding(globalNS, "rb"), true),
			overlays: []merge.Item{item(roleBinding("team", "rb", "carol"), false)},
			want:     roleBinding(globalNS, "rb", "carol"),
		},
		{
			name:     "roleRef is atomic: replaced as a whole",
			base:     item(roleBinding(globalNS, "rb", "alice"), false),
			overlays: []merge.Item{item(withRef(roleBinding("team", "rb", "alice"), editRef), false)},
			want:     withRef(roleBinding(globalNS, "rb", "alice"), editRef),
		},
		{
			name:      "under a lock, roleRef and subjects both blocked",
			base:      item(roleBinding(globalNS, "rb", "alice"), true),
			overlays:  []merge.Item{item(withRef(roleBinding("team", "rb", "carol"), editRef), false)},
			want:      roleBinding(globalNS, "rb", "alice"),
			conflicts: [][]string{{"blocked at .roleRef, .subjects: set by locked " + globalNS + "/rb"}},
		},
		{
			name: "a locked parent's subjects hold against the local overlay",
			base: item(roleBinding(globalNS, "rb", "alice"), false),
			overlays: []merge.Item{
				item(roleBinding("org", "rb", "bob"), true),
				item(roleBinding("team", "rb", "carol"), false),
			},
			want:      roleBinding(globalNS, "rb", "bob"),
			conflicts: [][]string{{"overlay by team/rb blocked at .subjects: set by locked org/rb"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			merged, conflicts := o.Overlay(tt.base, tt.overlays)
			checkConflicts(t, conflicts, tt.conflicts)
			got, ok := merged.(*rbacv1.RoleBinding)
			if !ok {
				t.Fatalf("merged is %T, want *rbacv1.RoleBinding", merged)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("merged =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// TestOverlayNetworkPolicy overlays typed NetworkPolicies, as informers hand
// them out (empty TypeMeta), with client-go's networking/v1 schema.
func TestOverlayNetworkPolicy(t *testing.T) {
	t.Parallel()
	o := testfixture.BuiltinOverlayer(t, "networking.k8s.io/v1", "NetworkPolicy")
	np := func(namespace string, app string, policyTypes ...networkingv1.PolicyType) *networkingv1.NetworkPolicy {
		p := &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "deny", UID: types.UID("uid-" + namespace)},
			Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: policyTypes},
		}
		if app != "" {
			p.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
		}
		return p
	}
	base := np(globalNS, "web", networkingv1.PolicyTypeIngress)
	tests := []struct {
		name      string
		locked    bool
		overlay   *networkingv1.NetworkPolicy
		want      *networkingv1.NetworkPolicy
		conflicts [][]string
	}{
		{
			name:    "policyTypes, an atomic list, replaced",
			overlay: np("team", "web", networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress),
			want:    np(globalNS, "web", networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress),
		},
		{
			name:      "under a lock, policyTypes blocked",
			locked:    true,
			overlay:   np("team", "web", networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress),
			want:      base,
			conflicts: [][]string{{"overlay by team/deny blocked at .spec.policyTypes: set by locked " + globalNS + "/deny"}},
		},
		{
			// podSelector is an atomic map, and every stored NetworkPolicy has
			// one: an overlay's empty selector (all pods) replaces the base's.
			name:    "an empty podSelector, atomic, replaces the base's",
			overlay: np("team", "", networkingv1.PolicyTypeIngress),
			want:    np(globalNS, "", networkingv1.PolicyTypeIngress),
		},
		{
			name:      "under a lock, an empty podSelector is blocked",
			locked:    true,
			overlay:   np("team", "", networkingv1.PolicyTypeIngress),
			want:      base,
			conflicts: [][]string{{"blocked at .spec.podSelector: set by locked " + globalNS + "/deny"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			merged, conflicts := o.Overlay(merge.Item{Namespace: globalNS, Name: "deny", Object: base, Locked: tt.locked},
				[]merge.Item{{Namespace: "team", Name: "deny", Object: tt.overlay}})
			checkConflicts(t, conflicts, tt.conflicts)
			if !reflect.DeepEqual(merged, tt.want) {
				t.Errorf("merged =\n%+v\nwant\n%+v", merged, tt.want)
			}
		})
	}
}
