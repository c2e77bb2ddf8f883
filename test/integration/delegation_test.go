package integration

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dlNotHeld is kube-apiserver's refusal of a binding whose role's rules the
// writer does not hold (and may not bind).
const dlNotHeld = "attempting to grant RBAC permissions not currently held"

// TestInheritedDelegation: an inherited admin delegates exactly what a real
// admin binding would let it delegate (issue 26, point 1). kube-apiserver
// asks the authorizer chain whether the writer may bind the role; the
// webhook allows it when the writer's rules in the namespace, real and
// inherited, cover the role's rules.
func TestInheritedDelegation(t *testing.T) {
	kube, _ := admin(t)
	ensureNamespace(t, kube, globalNS)
	gdNamespace(t, kube, "dl-org", nil, nil)
	gdNamespace(t, kube, "dl-team", map[string]string{"implicit.dev/parent": "dl-org"}, nil)
	gdNamespace(t, kube, "dl-other", nil, nil)

	t.Log("dl-dana is admin of dl-org, inherited in dl-team; dl-vic views dl-org, inherited in dl-team")
	gdBindUser(t, kube, "dl-org", "dl-dana-admin", "ClusterRole", "admin", "dl-dana")
	gdBindUser(t, kube, "dl-org", "dl-vic-view", "ClusterRole", "view", "dl-vic")
	t.Log("real Roles that let dl-dana write RoleBindings in dl-other, and dl-vic in dl-team")
	rbWriter := rbacv1.PolicyRule{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}, Verbs: []string{"create", "get", "delete"}}
	azRole(t, kube, "dl-other", "dl-rb-writer", rbWriter)
	azRole(t, kube, "dl-team", "dl-rb-writer", rbWriter)
	gdBindUser(t, kube, "dl-other", "dl-dana-rb-writer", "Role", "dl-rb-writer", "dl-dana")
	gdBindUser(t, kube, "dl-team", "dl-vic-rb-writer", "Role", "dl-rb-writer", "dl-vic")
	quota := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "dl-quota"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"resourcequotas"}, Verbs: []string{"update"}}},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(t.Context(), quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := kube.RbacV1().ClusterRoles().Delete(context.Background(), quota.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting ClusterRole %s: %v", quota.Name, err)
		}
	})
	azWaitViewItem(t, "rolebindings", "dl-team", "dl-dana-admin", "parent", "dl-org", nil)
	azWaitViewItem(t, "rolebindings", "dl-team", "dl-vic-view", "parent", "dl-org", nil)
	eventually(t, "dl-dana may create RoleBindings in dl-team (inherited admin)", func(context.Context) error {
		if !azCanI(t, "dl-dana", nil, "create", "rolebindings", "dl-team") {
			return errorf("no")
		}
		return nil
	})

	dana, vic := gdUser(t, "dl-dana"), gdUser(t, "dl-vic")
	created := func(name string) { azCleanupBinding(t, kube, "dl-team", name) }

	t.Log("dl-dana delegates view and edit in dl-team")
	created("dl-sam-view")
	dana.ok("create", "rolebinding", "dl-sam-view", "-n", "dl-team", "--clusterrole=view", "--user=dl-sam")
	created("dl-sam-edit")
	dana.ok("create", "rolebinding", "dl-sam-edit", "-n", "dl-team", "--clusterrole=edit", "--user=dl-sam")

	t.Log("dl-dana may not bind admin in dl-other, where she inherits nothing")
	dana.refused([]string{dlNotHeld}, "create", "rolebinding", "dl-sam-admin", "-n", "dl-other", "--clusterrole=admin", "--user=dl-sam")
	t.Log("nor a role with a rule she does not hold, in dl-team")
	dana.refused([]string{dlNotHeld}, "create", "rolebinding", "dl-sam-quota", "-n", "dl-team", "--clusterrole=dl-quota", "--user=dl-sam")

	t.Log("dl-vic, an inherited viewer who may write RoleBindings in dl-team, binds view but not edit")
	created("dl-vic-sam-view")
	vic.ok("create", "rolebinding", "dl-vic-sam-view", "-n", "dl-team", "--clusterrole=view", "--user=dl-sam")
	vic.refused([]string{dlNotHeld}, "create", "rolebinding", "dl-vic-sam-edit", "-n", "dl-team", "--clusterrole=edit", "--user=dl-sam")

	t.Log("escalate is never answered: dl-dana may not escalate roles in dl-team")
	azExpectCan(t, false, "dl-dana", nil, "escalate", "roles", "dl-team")

	// The one thing a real admin does that an inherited one can't (README,
	// docs/security.md): kube-apiserver checks a Role's rules against the
	// writer's real RBAC rules only, and asks the authorizers nothing but
	// escalate, which carries no rules. kube-apiserver is the oracle: a
	// real admin binding in dl-team lets dl-rita write the same Role.
	t.Log("dl-dana may create Roles in dl-team, yet not one with a rule she holds only by inheritance; dl-rita, a real admin there, may")
	azExpectCan(t, true, "dl-dana", nil, "create", "roles", "dl-team")
	podReader := []string{"create", "role", "dl-pod-reader", "-n", "dl-team", "--verb=get", "--resource=pods", "--dry-run=server"}
	dana.refused([]string{dlNotHeld}, podReader...)
	gdBindUser(t, kube, "dl-team", "dl-rita-admin", "ClusterRole", "admin", "dl-rita")
	rita := gdUser(t, "dl-rita")
	eventually(t, "dl-rita, a real admin of dl-team, writes the Role dl-dana can't", func(context.Context) error {
		if r := rita.run(podReader...); r.err != nil {
			return errorf("%v: %s", r.err, r.stderr)
		}
		return nil
	})
}
