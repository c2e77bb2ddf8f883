package integration

import (
	"context"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNamespaceDeletion checks that kube-controller-manager's namespace
// controller, which walks every aggregated API, still finishes deleting a
// namespace with implicit-apiserver registered, and that the view of a
// deleted namespace is empty.
func TestNamespaceDeletion(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	createRoleBinding(t, kube, globalNS, "nd-org-viewers", "view", "org:viewers")
	createNamespace(t, kube, "nd-team", nil, nil)
	createRoleBinding(t, kube, "nd-team", "nd-local", "edit", "team:devs")
	createRoleBinding(t, kube, "nd-team", "nd-locked", "view", "team:auditors", locked)
	waitForView(t, dyn, viewRoleBindings, "nd-team", "nd-", map[string]viewItem{
		"nd-org-viewers": {Scope: "global", Source: globalNS},
		"nd-local":       {Scope: "local", Source: "nd-team"},
		"nd-locked":      {Scope: "local", Source: "nd-team"},
	})

	// The local kube-controller-manager runs as admin, which may unlock
	// anyway; TestLocks in pkg/admission covers a namespace controller
	// without unlock deleting a locked object of a terminating namespace.
	t.Log("deleting nd-team: the namespace controller must finish, the locked nd-locked included (it goes with its namespace)")
	if err := kube.CoreV1().Namespaces().Delete(t.Context(), "nd-team", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "nd-team is gone", func(ctx context.Context) error {
		ns, err := kube.CoreV1().Namespaces().Get(ctx, "nd-team", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("still %s: %v", ns.Status.Phase, ns.Status.Conditions)
	})
	waitForView(t, dyn, viewRoleBindings, "nd-team", "nd-", map[string]viewItem{})
}
