package integration

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestPreviewHidesUnreadableNamespaces: a parent admin's preview names only
// the namespaces whose view item the admin may read (issue 24, item 9).
// pv-alice is admin of pv-p and reads its views through bindings her
// children inherit; pv-c2 excludes them, so she may not read pv-c2's
// views: her preview of a new binding in pv-p counts pv-c2 as hidden and
// names neither it nor what it holds.
func TestPreviewHidesUnreadableNamespaces(t *testing.T) {
	kube, _ := admin(t)
	ensureNamespace(t, kube, globalNS)
	gdNamespace(t, kube, "pv-p", nil, nil)
	gdNamespace(t, kube, "pv-c1", map[string]string{"implicit.dev/parent": "pv-p"}, nil)
	gdNamespace(t, kube, "pv-c2", map[string]string{"implicit.dev/parent": "pv-p"},
		map[string]string{"implicit.dev/exclude": "rolebindings/pv-alice-admin,rolebindings/pv-alice-views"})

	t.Log("pv-alice: admin of pv-p, and a reader of its views and previews through pv-alice-views (pv-c2 excludes both)")
	views := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-views"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"implicit.dev"}, Resources: []string{"rolebindings"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"implicit.dev"}, Resources: []string{"previews"}, Verbs: []string{"create"}},
		},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(t.Context(), views, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kube.RbacV1().ClusterRoles().Delete(context.Background(), views.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting ClusterRole %s: %v", views.Name, err)
		}
	})
	gdBindUser(t, kube, "pv-p", "pv-alice-admin", "ClusterRole", "admin", "pv-alice")
	gdBindUser(t, kube, "pv-p", "pv-alice-views", "ClusterRole", "pv-views", "pv-alice")
	azWaitViewItem(t, "rolebindings", "pv-c1", "pv-alice-views", "parent", "pv-p", nil)
	eventually(t, "pv-alice may read pv-c1's views, not pv-c2's", func(context.Context) error {
		if !azCanI(t, "pv-alice", nil, "get", "rolebindings.implicit.dev", "pv-c1") {
			return errorf("pv-alice may not get rolebindings.implicit.dev in pv-c1")
		}
		if azCanI(t, "pv-alice", nil, "get", "rolebindings.implicit.dev", "pv-c2") {
			return errorf("pv-alice may get rolebindings.implicit.dev in pv-c2")
		}
		return nil
	})

	cfg, err := cp.UserConfig("pv-alice")
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	proposed := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: "pv-new", Namespace: "pv-p"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "pv-bob"}},
	}
	raw, err := json.Marshal(proposed)
	if err != nil {
		t.Fatal(err)
	}
	req := &v1alpha1.Preview{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Preview"},
		Spec:     v1alpha1.PreviewSpec{Resource: "rolebindings", Object: &runtime.RawExtension{Raw: raw}},
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(req)
	if err != nil {
		t.Fatal(err)
	}
	previews := schema.GroupVersionResource{Group: "implicit.dev", Version: "v1alpha1", Resource: "previews"}

	t.Log("as pv-alice: previewing a new RoleBinding pv-new in pv-p")
	var out *unstructured.Unstructured
	eventually(t, "pv-alice previews pv-new", func(ctx context.Context) error {
		out, err = dyn.Resource(previews).Namespace("pv-p").Create(ctx, &unstructured.Unstructured{Object: content}, metav1.CreateOptions{})
		return err
	})
	var got v1alpha1.Preview
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(out.Object, &got); err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, c := range got.Status.Changed {
		named = append(named, c.Namespace)
	}
	for _, u := range got.Status.Unchanged {
		named = append(named, u.Namespace)
	}
	if want := []string{"pv-c1", "pv-p"}; !slices.Equal(named, want) || got.Status.Hidden != 1 {
		t.Errorf("pv-alice's preview names %v and hides %d, want %v and 1 hidden (pv-c2)", named, got.Status.Hidden, want)
	}
	t.Logf("the preview reaches %d namespaces, names %d and hides %d", got.Status.Reached, len(got.Status.Changed)+len(got.Status.Unchanged), got.Status.Hidden)

	t.Log("as admin, who may read every view: every namespace is named")
	_, adminDyn := admin(t)
	out, err = adminDyn.Resource(previews).Namespace("pv-p").Create(t.Context(), &unstructured.Unstructured{Object: content}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var all v1alpha1.Preview
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(out.Object, &all); err != nil {
		t.Fatal(err)
	}
	named = nil
	for _, c := range all.Status.Changed {
		named = append(named, c.Namespace)
	}
	if want := []string{"pv-c1", "pv-c2", "pv-p"}; !slices.Equal(named, want) || all.Status.Hidden != 0 {
		t.Errorf("admin's preview names %v and hides %d, want %v and none", named, all.Status.Hidden, want)
	}
}
