package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// egAnnotated sets annotation k of a RoleBinding.
func egAnnotated(k, v string) rbOpt {
	return func(rb *rbacv1.RoleBinding) {
		if rb.Annotations == nil {
			rb.Annotations = map[string]string{}
		}
		rb.Annotations[k] = v
	}
}

// egJSON is v as JSON, for an annotation's value.
func egJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestExceptionGuards checks the exceptions guard through kube-apiserver
// (issue 42): a global RoleBinding whose source requires approval can't be
// excluded by annotation; a tenant's exception of it is admitted but not in
// effect until someone else allowed approve on the source approves it; the
// tenant can't approve its own, nor can a user without approve; the org
// admin's approval takes the item out of the tenant's view, and an edit of
// the exception puts it back. An exception of a locked item, an end past
// the source's maximum, and a tenant's expiry mark are refused.
func TestExceptionGuards(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	gdNamespace(t, kube, "eg-team", nil, nil)
	createRoleBinding(t, kube, globalNS, "eg-approval", "view", "eg-auditors", egAnnotated(v1alpha1.AnnotationExceptionApproval, "required"))
	createRoleBinding(t, kube, globalNS, "eg-max", "view", "eg-auditors", egAnnotated(v1alpha1.AnnotationExceptionMaxDuration, "1h"))
	createRoleBinding(t, kube, globalNS, "eg-locked", "view", "eg-auditors", locked)
	global := viewItem{Scope: "global", Source: globalNS}
	all := map[string]viewItem{"eg-approval": global, "eg-max": global, "eg-locked": global}
	waitForView(t, dyn, viewRoleBindings, "eg-team", "eg-", all)

	t.Log("eg-tenant is admin of eg-team and may update the namespace; eg-approver may approve RoleBindings anywhere; eg-nobody may only update eg-team")
	tenant, approver, nobody := gdUser(t, "eg-tenant"), gdUser(t, "eg-approver"), gdUser(t, "eg-nobody")
	gdBindUser(t, kube, "eg-team", "admin-eg-tenant", "ClusterRole", "admin", "eg-tenant")
	for _, u := range []string{"eg-tenant", "eg-approver", "eg-nobody"} {
		hdGrant(t, kube, u+"-ns", "", u, rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch"}, ResourceNames: []string{"eg-team"},
		})
	}
	hdGrant(t, kube, "eg-approver-approve", "", "eg-approver", rbacv1.PolicyRule{
		APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"approve"},
	})
	hdWaitCan(t, tenant, "patch", "namespaces/eg-team")
	hdWaitCan(t, nobody, "patch", "namespaces/eg-team")
	hdWaitCan(t, approver, "approve", "rolebindings", "-n", globalNS)
	annotate := func(key, value string) []string {
		return []string{"annotate", "namespace", "eg-team", "--overwrite", key + "=" + value}
	}
	denied := `admission webhook "parents.implicit.dev" denied the request`

	t.Log("as eg-tenant: excluding eg-approval by annotation is refused, naming the way to request an exception")
	tenant.refused([]string{denied, "kubectl implicit exceptions request NAME -n eg-team --exclude rolebindings/eg-approval"},
		annotate(v1alpha1.AnnotationExclude, "rolebindings/eg-approval")...)

	t.Log("as eg-tenant: an exception of eg-approval is admitted, and eg-approval stays in the view: not approved")
	spec := v1alpha1.ExceptionSpec{Name: "eg-skip", Exclude: []string{"rolebindings/eg-approval"}, Reason: "TICKET-42", RequestedBy: "eg-tenant"}
	tenant.ok(annotate(v1alpha1.AnnotationExceptions, egJSON(t, []v1alpha1.ExceptionSpec{spec}))...)
	egWaitConflict(t, "eg-approval", "exception eg-skip is not approved for "+globalNS)
	waitForView(t, dyn, viewRoleBindings, "eg-team", "eg-", all)

	approval := func(by string) string {
		return egJSON(t, map[string]v1alpha1.ExceptionApproval{"eg-skip": {
			By: by, At: metav1.Now(), Digest: merge.ExceptionDigest(spec), Sources: []string{globalNS},
		}})
	}
	t.Log("as eg-tenant: approving its own request is refused")
	tenant.refused([]string{denied, "the requester can't approve their own request"},
		annotate(v1alpha1.AnnotationExceptionApprovals, approval("eg-tenant"))...)

	t.Log("as eg-nobody: approving without approve on the source is refused")
	nobody.refused([]string{denied, `approving needs the "approve" permission`, "in namespace " + globalNS},
		annotate(v1alpha1.AnnotationExceptionApprovals, approval("eg-nobody"))...)

	t.Log("as eg-approver: the approval is admitted, and eg-approval leaves eg-team's view")
	approver.ok(annotate(v1alpha1.AnnotationExceptionApprovals, approval("eg-approver"))...)
	waitForView(t, dyn, viewRoleBindings, "eg-team", "eg-", map[string]viewItem{"eg-max": global, "eg-locked": global})
	r := tenant.ok("get", "rolebindings.implicit.dev", "-n", "eg-team", "-o", "name")
	if strings.Contains(r.stdout, "eg-approval") {
		t.Errorf("eg-tenant still sees eg-approval:\n%s", r.stdout)
	}

	t.Log("as eg-tenant: editing the approved exception makes it requested again: eg-approval is back")
	edited := spec
	edited.Reason = "TICKET-42, and more"
	tenant.ok(annotate(v1alpha1.AnnotationExceptions, egJSON(t, []v1alpha1.ExceptionSpec{edited}))...)
	waitForView(t, dyn, viewRoleBindings, "eg-team", "eg-", all)

	t.Log("as eg-tenant: an exception of the locked eg-locked is refused")
	lock := v1alpha1.ExceptionSpec{Name: "eg-lock", Exclude: []string{"rolebindings/eg-locked"}, Reason: "TICKET-43", RequestedBy: "eg-tenant"}
	tenant.refused([]string{denied, "an exception of a locked item is refused", globalNS + "/eg-locked"},
		annotate(v1alpha1.AnnotationExceptions, egJSON(t, []v1alpha1.ExceptionSpec{edited, lock}))...)

	t.Log("as eg-tenant: an exception of eg-max ending past its 1h maximum is refused")
	long := v1alpha1.ExceptionSpec{Name: "eg-long", Exclude: []string{"rolebindings/eg-max"}, Reason: "TICKET-44", RequestedBy: "eg-tenant",
		ExpiresAt: &metav1.Time{Time: time.Now().Add(2 * time.Hour)}}
	tenant.refused([]string{denied, "is past the maximum the source " + globalNS + "/eg-max allows: 1h0m0s"},
		annotate(v1alpha1.AnnotationExceptions, egJSON(t, []v1alpha1.ExceptionSpec{edited, long}))...)

	t.Log("as eg-tenant: writing the expiry marks is refused")
	tenant.refused([]string{denied, "implicit.dev/exceptions-expired is written by implicit-apiserver only"},
		annotate(v1alpha1.AnnotationExceptionsExpired, egJSON(t, map[string]string{"eg-skip": merge.ExceptionDigest(edited)}))...)
	waitForView(t, dyn, viewRoleBindings, "eg-team", "eg-", all)
}

// egWaitConflict waits until eg-team's view item name reports a conflict
// containing want: the server has read the exception and kept the item.
func egWaitConflict(t *testing.T, name, want string) {
	t.Helper()
	_, dyn := admin(t)
	eventually(t, "eg-team's "+name+" reports "+want, func(ctx context.Context) error {
		it, err := dyn.Resource(viewRoleBindings).Namespace("eg-team").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c := it.GetAnnotations()[v1alpha1.AnnotationConflict]; !strings.Contains(c, want) {
			return errorf("conflict %q", c)
		}
		return nil
	})
}
