package integration

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
)

// TestTenantAccess checks that implicit-apiserver delegates authorization to
// the host cluster: a tenant with ordinary RBAC on rolebindings.implicit.dev
// in their namespace reads that view, and nothing else.
func TestTenantAccess(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	createNamespace(t, kube, "ta-a", nil, nil)
	createNamespace(t, kube, "ta-b", nil, nil)
	createRoleBinding(t, kube, globalNS, "ta-org-viewers", "view", "org:viewers")
	createRoleBinding(t, kube, "ta-b", "ta-b-secret-team", "edit", "b:devs")

	t.Log("alice may get, list and watch rolebindings.implicit.dev in ta-a, through a Role of her namespace")
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "ta-view-reader", Namespace: "ta-a"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"implicit.dev"}, Resources: []string{"rolebindings"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := kube.RbacV1().Roles("ta-a").Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "ta-alice", Namespace: "ta-a"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "ta-view-reader"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}},
	}
	if _, err := kube.RbacV1().RoleBindings("ta-a").Create(t.Context(), rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := cp.UserConfig("alice", "tenants")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	t.Log("alice reads ta-a's view, global items included")
	waitForView(t, alice, viewRoleBindings, "ta-a", "ta-", map[string]viewItem{
		"ta-org-viewers": {Scope: "global", Source: globalNS},
		"ta-alice":       {Scope: "local", Source: "ta-a"},
	})
	if _, err := alice.Resource(viewRoleBindings).Namespace("ta-a").Get(t.Context(), "ta-org-viewers", metav1.GetOptions{}); err != nil {
		t.Errorf("alice get in ta-a: %v", err)
	}

	t.Log("alice gets 403 on ta-b's view, on -A, on the other views of ta-a, and on the sources in the global namespace")
	denied := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"list ta-b", func(ctx context.Context) error {
			_, err := alice.Resource(viewRoleBindings).Namespace("ta-b").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"get ta-b", func(ctx context.Context) error {
			_, err := alice.Resource(viewRoleBindings).Namespace("ta-b").Get(ctx, "ta-b-secret-team", metav1.GetOptions{})
			return err
		}},
		{"list all namespaces", func(ctx context.Context) error {
			_, err := alice.Resource(viewRoleBindings).List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list all namespaces with a field selector on ta-a", func(ctx context.Context) error {
			_, err := alice.Resource(viewRoleBindings).List(ctx, metav1.ListOptions{FieldSelector: "metadata.namespace=ta-a"})
			return err
		}},
		{"list roles.implicit.dev in ta-a", func(ctx context.Context) error {
			_, err := alice.Resource(viewRoles).Namespace("ta-a").List(ctx, metav1.ListOptions{})
			return err
		}},
		{"list the global sources", func(ctx context.Context) error {
			_, err := alice.Resource(rbacv1.SchemeGroupVersion.WithResource("rolebindings")).Namespace(globalNS).List(ctx, metav1.ListOptions{})
			return err
		}},
	}
	for _, d := range denied {
		if err := d.call(t.Context()); !apierrors.IsForbidden(err) {
			t.Errorf("alice %s: %v, want 403 Forbidden", d.name, err)
		}
	}

	t.Log("kubectl as alice says the same")
	kubeconfig, err := cp.WriteUserKubeconfig("alice", "tenants")
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := cp.Kubectl(t.Context(), "--kubeconfig="+kubeconfig, "get", "rolebindings.implicit.dev", "-n", "ta-a")
	if err != nil || !strings.Contains(out, "ta-org-viewers") {
		t.Errorf("kubectl get as alice in ta-a: %v\n%s", err, out)
	}
	_, stderr, err := cp.Kubectl(t.Context(), "--kubeconfig="+kubeconfig, "get", "rolebindings.implicit.dev", "-n", "ta-b")
	if err == nil || !strings.Contains(stderr, "Forbidden") {
		t.Errorf("kubectl get as alice in ta-b: err %v, stderr %q, want Forbidden", err, stderr)
	}
	_ = dyn
}
