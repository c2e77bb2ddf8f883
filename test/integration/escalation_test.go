package integration

import (
	"context"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
)

// TestInheritedRoleResolvesWhereBound: an inherited binding's Role resolves
// as RBAC resolves it where the binding is written, the real Role in the
// binding's own namespace (issue 24, item 2). esc-alice is admin of esc-p
// (a real RoleBinding) and esc-c is esc-p's child; the global namespace
// holds a Role quota-admin that may update ResourceQuotas. esc-alice
// creates a harmless Role quota-admin in esc-p, binds it to herself (RBAC's
// escalation check passes: she holds its rules), and deletes it: her
// binding, inherited by esc-c, must grant nothing there, not the global
// Role of that name. The positive control: a real Role of esc-p, bound in
// esc-p to esc-bob, grants in esc-c, until it is deleted.
func TestInheritedRoleResolvesWhereBound(t *testing.T) {
	kube, _ := admin(t)
	ensureNamespace(t, kube, globalNS)
	gdNamespace(t, kube, "esc-p", nil, nil)
	// The parent guard lets admin set the label; the parent-uid webhook
	// records esc-p's uid.
	gdNamespace(t, kube, "esc-c", map[string]string{"implicit.dev/parent": "esc-p"}, nil)

	t.Log("the global Role quota-admin (update resourcequotas), bound by nobody")
	azRole(t, kube, globalNS, "quota-admin", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"resourcequotas"}, Verbs: []string{"update"}})
	t.Log("esc-alice is admin of esc-p (a real RoleBinding to ClusterRole admin), inherited by esc-c")
	gdBindUser(t, kube, "esc-p", "esc-alice-admin", "ClusterRole", "admin", "esc-alice")
	azWaitViewItem(t, "rolebindings", "esc-c", "esc-alice-admin", "parent", "esc-p", nil)
	// ClusterRole admin reads ResourceQuotas, never updates them.
	azExpectCan(t, false, "esc-alice", nil, "update", "resourcequotas", "esc-c")

	alice := gdUser(t, "esc-alice")
	t.Log("as esc-alice: a harmless Role quota-admin in esc-p, bound to herself, and a Role cm-reader bound to esc-bob")
	alice.ok("create", "role", "quota-admin", "-n", "esc-p", "--verb=get", "--resource=configmaps")
	alice.ok("create", "rolebinding", "esc-alice-quota", "-n", "esc-p", "--role=quota-admin", "--user=esc-alice")
	alice.ok("create", "role", "cm-reader", "-n", "esc-p", "--verb=get", "--resource=configmaps")
	alice.ok("create", "rolebinding", "esc-bob-cm", "-n", "esc-p", "--role=cm-reader", "--user=esc-bob")
	azCleanupBinding(t, kube, "esc-p", "esc-alice-quota")
	azCleanupBinding(t, kube, "esc-p", "esc-bob-cm")
	azWaitViewItem(t, "rolebindings", "esc-c", "esc-alice-quota", "parent", "esc-p", nil)
	azWaitViewItem(t, "rolebindings", "esc-c", "esc-bob-cm", "parent", "esc-p", nil)

	t.Log("positive control: esc-p's real Role cm-reader, bound in esc-p, grants esc-bob in esc-c")
	eventually(t, "esc-bob may get configmaps in esc-c", func(ctx context.Context) error {
		if !azCanI(t, "esc-bob", nil, "get", "configmaps", "esc-c") {
			return errorf("kubectl auth can-i get configmaps -n esc-c --as esc-bob: no")
		}
		return nil
	})
	azExpectCan(t, false, "esc-bob", nil, "delete", "configmaps", "esc-c")
	azExpectCan(t, false, "esc-alice", nil, "update", "resourcequotas", "esc-c")

	t.Log("as esc-alice: deleting her Role quota-admin; esc-p's view now shows the global one under that name")
	alice.ok("delete", "role", "quota-admin", "-n", "esc-p")
	azWaitViewItem(t, "roles", "esc-p", "quota-admin", "global", globalNS, nil)
	azWaitViewItem(t, "roles", "esc-c", "quota-admin", "global", globalNS, nil)
	azPastTTL(t, time.Now())
	t.Log("her binding names a Role esc-p no longer has: it grants nothing in esc-c")
	azExpectCan(t, false, "esc-alice", nil, "update", "resourcequotas", "esc-c")
	azExpectCan(t, false, "esc-alice", nil, "update", "resourcequotas", "esc-p")

	t.Log("positive control, revoked: deleting cm-reader withdraws esc-bob's grant in esc-c")
	alice.ok("delete", "role", "cm-reader", "-n", "esc-p")
	eventually(t, "esc-bob may no longer get configmaps in esc-c", func(ctx context.Context) error {
		if azCanI(t, "esc-bob", nil, "get", "configmaps", "esc-c") {
			return errorf("kubectl auth can-i get configmaps -n esc-c --as esc-bob: yes")
		}
		return nil
	})
}
