package integration

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
)

// TestDefaultRolesReadTheirViews checks the shipped aggregated roles
// (artifacts/base, applied by the suite): users bound to the built-in view
// or edit role in a namespace read its effective NetworkPolicies, as they
// read its real ones, but not its RoleBindings or Roles views, which they
// can't read natively either; admin reads every view.
func TestDefaultRolesReadTheirViews(t *testing.T) {
	kube, _ := admin(t)
	ctx := t.Context()
	createNamespace(t, kube, "dr-team", nil, nil)
	for _, role := range []string{"view", "edit", "admin"} {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "dr-" + role, Namespace: "dr-team"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "dr-" + role + "-user"}},
		}
		if _, err := kube.RbacV1().RoleBindings("dr-team").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		role     string
		readable map[string]bool
	}{
		{"view", map[string]bool{"networkpolicies": true, "rolebindings": false, "roles": false}},
		{"edit", map[string]bool{"networkpolicies": true, "rolebindings": false, "roles": false}},
		{"admin", map[string]bool{"networkpolicies": true, "rolebindings": true, "roles": true}},
	} {
		cfg, err := cp.UserConfig("dr-" + tc.role + "-user")
		if err != nil {
			t.Fatal(err)
		}
		user, err := dynamic.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for resource, want := range tc.readable {
			gvr := viewRoleBindings
			gvr.Resource = resource
			// The controller manager aggregates the roles a moment after
			// the suite applies them.
			eventually(t, tc.role+" on "+resource+".implicit.dev", func(ctx context.Context) error {
				_, err := user.Resource(gvr).Namespace("dr-team").List(ctx, metav1.ListOptions{})
				switch {
				case want && err != nil:
					return errorf("%s lists %s.implicit.dev: %v, want allowed", tc.role, resource, err)
				case !want && !apierrors.IsForbidden(err):
					return errorf("%s lists %s.implicit.dev: %v, want Forbidden", tc.role, resource, err)
				}
				return nil
			})
		}
		t.Logf("%s reads %v", tc.role, tc.readable)
	}
}
