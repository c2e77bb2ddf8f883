package integration

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestLockAfterCandidate is issue 24's fourth hole, through kube-apiserver:
// alice, admin of gdc-org, writes gdc-rb and its candidate gdc-rb-next,
// staged to every child without a stage. The org admin then locks gdc-rb:
// had that been admitted, every child would keep seeing alice's candidate,
// now locked. Locking a source that has an open candidate is refused,
// naming it, even for who may unlock (cluster-admin); once the candidate
// is gone, the lock is admitted.
func TestLockAfterCandidate(t *testing.T) {
	kube, _ := admin(t)
	adm := gdAdmin(t)
	alice := gdUser(t, "gdc-alice")
	gdNamespace(t, kube, "gdc-org", nil, nil)
	gdNamespace(t, kube, "gdc-team", map[string]string{v1alpha1.LabelParent: "gdc-org"}, nil)
	gdBindUser(t, kube, "gdc-org", "gdc-alice-admin", "ClusterRole", "admin", "gdc-alice")

	t.Log("alice writes gdc-rb and the candidate gdc-rb-next in her namespace")
	createRoleBinding(t, kube, "gdc-org", "gdc-rb", "view", "gdc-readers")
	alice.ok("create", "rolebinding", "gdc-rb-next", "-n", "gdc-org", "--clusterrole=view", "--group=gdc-alice-friends")
	alice.ok("annotate", "rolebinding", "gdc-rb-next", "-n", "gdc-org",
		v1alpha1.AnnotationCandidateFor+"=gdc-rb", v1alpha1.AnnotationCanarySelector+"=!"+v1alpha1.LabelStage)

	t.Log("the org admin locks gdc-rb: refused while the candidate is open")
	adm.refused([]string{`open candidate "gdc-rb-next"`, "promote it", "abort it"},
		"annotate", "rolebinding", "gdc-rb", "-n", "gdc-org", v1alpha1.AnnotationLocked+"=true")

	t.Log("the candidate is aborted: now the lock is admitted")
	adm.ok("delete", "rolebinding", "gdc-rb-next", "-n", "gdc-org")
	adm.ok("annotate", "rolebinding", "gdc-rb", "-n", "gdc-org", v1alpha1.AnnotationLocked+"=true")
	t.Cleanup(func() {
		rb, err := kube.RbacV1().RoleBindings("gdc-org").Get(context.Background(), "gdc-rb", metav1.GetOptions{})
		if err == nil {
			delete(rb.Annotations, v1alpha1.AnnotationLocked)
			_, _ = kube.RbacV1().RoleBindings("gdc-org").Update(context.Background(), rb, metav1.UpdateOptions{})
		}
	})

	t.Log("and alice can't open a candidate of the locked source")
	alice.refusedWithInput(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: gdc-rb-again
  namespace: gdc-org
  annotations:
    `+v1alpha1.AnnotationCandidateFor+`: gdc-rb
    `+v1alpha1.AnnotationCanarySelector+`: "!`+v1alpha1.LabelStage+`"
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: gdc-alice-friends}]
`, []string{"which is locked", `"unlock"`}, "create", "-f", "-")
}

// TestDeleteParentNeedsUnlock: deleting a namespace others inherit from
// takes its locked sources, and what its ancestors pass down, out of its
// children's views; like opting out, that needs unlock on each, through
// kube-apiserver's DELETE of the namespace. alice may delete her namespace
// gdd-org (a grant an admin might give tenants); its child gdd-team
// inherits the org's locked gdd-rb.
func TestDeleteParentNeedsUnlock(t *testing.T) {
	kube, dyn := admin(t)
	alice := gdUser(t, "gdd-alice")
	gdNamespace(t, kube, "gdd-org", nil, nil)
	gdNamespace(t, kube, "gdd-team", map[string]string{v1alpha1.LabelParent: "gdd-org"}, nil)
	deleter := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "gdd-namespace-deleter"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "delete"}}},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(t.Context(), deleter, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoles().Delete(context.Background(), deleter.Name, metav1.DeleteOptions{})
	})
	gdBindUser(t, kube, "gdd-org", "gdd-alice-deleter", "ClusterRole", deleter.Name, "gdd-alice")
	createRoleBinding(t, kube, "gdd-org", "gdd-rb", "view", "gdd-auditors", locked)
	waitForView(t, dyn, viewRoleBindings, "gdd-team", "gdd-rb", map[string]viewItem{"gdd-rb": {Scope: "parent", Source: "gdd-org"}})
	// Every namespace's deletion is judged (not only those the synced
	// match condition names as parents): no wait for ConditionSync.

	alice.refused([]string{`deleting namespace "gdd-org"`, "gdd-org/gdd-rb (in the views of gdd-team)", `"unlock"`},
		"delete", "namespace", "gdd-org", "--wait=false")
}
