package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// TestHubApprovals (issue 42): an exception of a hub item whose source
// requires approval is approved by the hub's RBAC, whatever the member's
// says: through member-1's kube-apiserver and guards, a user allowed
// approve on the member only is refused, one allowed approve on the hub's
// global namespace is admitted, and the item leaves the tenant's view. The
// identities are the same names on both clusters, as with one identity
// provider for the fleet.
func TestHubApprovals(t *testing.T) {
	ctx := t.Context()
	hubKube, _ := clients(t, hub)
	kube, dyn := clients(t, member1)
	served := []schema.GroupResource{{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"},
		{Group: "rbac.authorization.k8s.io", Resource: "roles"}, {Group: "networking.k8s.io", Resource: "networkpolicies"}}
	if err := member1.RegisterGuards(ctx, implicit1, served); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The other tests of the suite run member-1 without the guards.
		ctx := context.Background()
		_ = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, controlplane.GuardsConfiguration, metav1.DeleteOptions{})
		_ = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, controlplane.GuardsConfiguration, metav1.DeleteOptions{})
	})

	// The hub: a global item requiring approval, and the org's approver.
	approveRole := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "ha-exception-approver"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"approve"}}}}
	for _, c := range []kubernetes.Interface{hubKube, kube} {
		if _, err := c.RbacV1().ClusterRoles().Create(ctx, approveRole, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	grant := func(c kubernetes.Interface, namespace, name, role, user string) {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}}
		if _, err := c.RbacV1().RoleBindings(namespace).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	grant(hubKube, globalNS, "ha-hub-approver", approveRole.Name, "ha-hub-approver")
	src := testfixture.GroupBinding(metav1.ObjectMeta{Name: "ha-waivable", Namespace: globalNS,
		Annotations: map[string]string{v1alpha1.AnnotationExceptionApproval: "required"}}, "view", "ha-readers")
	if _, err := hubKube.RbacV1().RoleBindings(globalNS).Create(ctx, src, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	// The member: the tenant's namespace; everyone below may update it; the
	// member's own approver may approve in every namespace of the member,
	// the member's implicit-global included.
	createNamespace(t, kube, "ha-team", "")
	nsWriter := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "ha-namespace-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{"ha-team"}, Verbs: []string{"get", "update", "patch"}}}}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, nsWriter, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, u := range []string{"ha-tenant", "ha-hub-approver", "ha-member-approver"} {
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ha-namespace-writer-" + u},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: nsWriter.Name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: u}}}
		if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	memberApprover := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ha-member-approver"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: approveRole.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "ha-member-approver"}}}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, memberApprover, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	waitItem(t, dyn, "ha-team", "ha-waivable", scopeFrom("global", globalNS, "hub"))

	as := func(user string) kubernetes.Interface {
		cfg := rest.CopyConfig(member1.AdminConfig())
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	annotate := func(c kubernetes.Interface, key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: string(b)}}})
		_, err = c.CoreV1().Namespaces().Patch(ctx, "ha-team", types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	spec := v1alpha1.ExceptionSpec{Name: "waiver", Exclude: []string{"rolebindings/ha-waivable"}, Reason: "HA-1", RequestedBy: "ha-tenant"}
	// The guards learn the parents webhook's configuration a moment after
	// it is written: the request is retried until the guard answers.
	eventually(t, 30*time.Second, "the tenant's request admitted", func(context.Context) error {
		return annotate(as("ha-tenant"), v1alpha1.AnnotationExceptions, []v1alpha1.ExceptionSpec{spec})
	})
	approval := func(by string) map[string]v1alpha1.ExceptionApproval {
		return map[string]v1alpha1.ExceptionApproval{spec.Name: {By: by, At: metav1.Now(), Digest: merge.ExceptionDigest(spec), Sources: []string{"hub/" + globalNS}}}
	}
	err := annotate(as("ha-member-approver"), v1alpha1.AnnotationExceptionApprovals, approval("ha-member-approver"))
	if err == nil || !strings.Contains(err.Error(), "of hub cluster hub") {
		t.Fatalf("an approver on the member only: %v, want refused naming the hub's namespace", err)
	}
	t.Logf("an approver on the member only, refused: %v", err)
	if err := annotate(as("ha-hub-approver"), v1alpha1.AnnotationExceptionApprovals, approval("ha-hub-approver")); err != nil {
		t.Fatalf("the hub's approver: %v", err)
	}
	eventually(t, converge, "ha-waivable out of ha-team's view", func(ctx context.Context) error {
		_, err := dyn.Resource(viewRoleBindings).Namespace("ha-team").Get(ctx, "ha-waivable", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still in the view (%v)", err)
	})
}
