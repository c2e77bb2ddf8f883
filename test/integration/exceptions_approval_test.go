package integration

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestExceptionApproval: an exception of a global RoleBinding whose source
// requires approval is Requested, naming the item, and the item stays in
// the view; approved by another user (kubectl implicit exceptions approve,
// with this version's digest and the source's namespace), it is Active and
// the item leaves the view.
func TestExceptionApproval(t *testing.T) {
	kube, dyn := admin(t)
	ctx := t.Context()
	ensureNamespace(t, kube, globalNS)
	path := buildPlugin(t)
	const (
		ns       = "exa-team"
		rb       = "exa-gated"
		exc      = "exa-ci"
		approver = "exa-approver"
		admins   = "exa:org-admins"
	)
	view := v1alpha1.SchemeGroupVersion.WithResource("rolebindings")
	createNamespace(t, kube, ns, nil, nil)
	createRoleBinding(t, kube, globalNS, rb, "view", "exa:readers", func(b *rbacv1.RoleBinding) {
		if b.Annotations == nil {
			b.Annotations = map[string]string{}
		}
		b.Annotations[v1alpha1.AnnotationExceptionApproval] = "required"
	})
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "exa-org-admins"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: admins}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
	approverConfig, err := cp.WriteUserKubeconfig(approver, admins)
	if err != nil {
		t.Fatal(err)
	}
	adm := pluginUser{t: t, name: "admin", path: path, kubeconfig: cp.KubeconfigPath(), home: t.TempDir()}
	org := pluginUser{t: t, name: approver, path: path, kubeconfig: approverConfig, home: t.TempDir()}
	inView := func(want bool) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := dyn.Resource(view).Namespace(ns).Get(ctx, rb, metav1.GetOptions{})
			switch {
			case want && err != nil:
				return err
			case !want && err == nil:
				return errorf("%s is still in %s's view", rb, ns)
			case !want && !apierrors.IsNotFound(err):
				return err
			}
			return nil
		}
	}
	eventually(t, "the item in the view", inView(true))

	t.Log("requested: the source requires approval, so the item stays")
	adm.expect(0, nil, "exceptions", "request", exc, "-n", ns, "--exclude", "rolebindings/"+rb, "--reason", "TICKET-43", "--expires", "1h")
	adm.expect(0, matches(`(?m)^`+ns+`\s+`+exc+`\s+rolebindings/`+rb+`\s+Requested\s+TICKET-43\s+admin\s+<none>\s.*rolebindings `+globalNS+`/`+rb), "exceptions", "-n", ns, "-o", "wide")
	eventually(t, "the item still in the view", inView(true))

	t.Log("approved by", approver, "for the source's namespace: in effect")
	org.expect(0, matches(`sources `+globalNS), "exceptions", "approve", exc, "-n", ns)
	adm.expect(0, matches(`(?m)^`+ns+`\s+`+exc+`\s+rolebindings/`+rb+`\s+Active\s+TICKET-43\s+admin\s+`+approver+`\s`), "exceptions", "-n", ns)
	eventually(t, "the item out of the view", inView(false))
}
