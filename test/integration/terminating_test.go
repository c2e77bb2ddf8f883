package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestTerminatingParent replays issue 39's attack through kube-apiserver: a
// tenant with admin in two namespaces under gt-org, and update and delete
// on those two namespace objects, can't move gt-c out from under gt-org
// (it would take the locked gt-sec from its view); so it holds gt-p in
// Terminating with a finalizer on its own RoleBinding there, deletes gt-p
// (no children: no guard is asked), and re-parents gt-c under it, so that
// gt-p's final removal would take gt-sec unjudged. A namespace going away is
// no place to move a child to: refused, and gt-sec stays in gt-c's view
// while gt-p terminates and after it is gone.
func TestTerminatingParent(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	gdNamespace(t, kube, "gt-org", nil, nil)
	gdNamespace(t, kube, "gt-c", map[string]string{v1alpha1.LabelParent: "gt-org"}, nil)
	gdNamespace(t, kube, "gt-p", map[string]string{v1alpha1.LabelParent: "gt-org"}, nil)
	createRoleBinding(t, kube, "gt-org", "gt-sec", "view", "gt-auditors", locked)
	waitForView(t, dyn, viewRoleBindings, "gt-c", "gt-sec", map[string]viewItem{"gt-sec": {Scope: "parent", Source: "gt-org"}})

	t.Log("gt-tenant is admin of gt-c and gt-p and may update and delete both namespace objects")
	tenant := gdUser(t, "gt-tenant")
	for _, ns := range []string{"gt-c", "gt-p"} {
		gdBindUser(t, kube, ns, "gt-tenant-admin", "ClusterRole", "admin", "gt-tenant")
	}
	hdGrant(t, kube, "gt-tenant-ns", "", "gt-tenant", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch", "delete"},
		ResourceNames: []string{"gt-c", "gt-p"},
	})
	hdWaitCan(t, tenant, "delete", "namespaces/gt-p")
	hdWaitCan(t, tenant, "create", "rolebindings", "-n", "gt-p")
	hdWaitCan(t, tenant, "patch", "namespaces/gt-c")

	t.Log("as gt-tenant: moving gt-c out from under gt-org needs unlock on gt-sec")
	tenant.refused([]string{`admission webhook "parents.implicit.dev" denied the request`, "gt-org/gt-sec", `"unlock"`},
		"label", "namespace", "gt-c", hdParent+"-")

	t.Log("as gt-tenant: a finalizer on its own RoleBinding in gt-p, then gt-p deleted: it stays Terminating")
	release := holdTerminating(t, kube, tenant, "gt-p", "gt-hold")

	t.Log("as gt-tenant: re-parenting gt-c under the Terminating gt-p is refused")
	tenant.refused([]string{`admission webhook "parents.implicit.dev" denied the request`, `namespace "gt-p" can't be the parent of namespace "gt-c": it is being terminated`},
		"label", "namespace", "gt-c", hdParent+"=gt-p", "--overwrite")
	waitForView(t, dyn, viewRoleBindings, "gt-c", "gt-sec", map[string]viewItem{"gt-sec": {Scope: "parent", Source: "gt-org"}})

	t.Log("the finalizer is removed: gt-p goes, gt-c keeps gt-sec")
	release()
	eventually(t, "gt-p is gone", func(ctx context.Context) error {
		ns, err := kube.CoreV1().Namespaces().Get(ctx, "gt-p", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errorf("gt-p is %s", ns.Status.Phase)
	})
	waitForView(t, dyn, viewRoleBindings, "gt-c", "gt-sec", map[string]viewItem{"gt-sec": {Scope: "parent", Source: "gt-org"}})
	c, err := kube.CoreV1().Namespaces().Get(t.Context(), "gt-c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Labels[v1alpha1.LabelParent]; p != "gt-org" {
		t.Errorf("gt-c's parent is %q, want gt-org", p)
	}
}

// TestTerminatingNamespaceTakesNoParent: the other way into a namespace
// going away. gt2-ops may arrange namespaces under gt2-org (update on the
// namespace objects) but not unlock gt2-org's locked gt2-sec. It holds its
// own gt2-p (parent of gt2-c) in Terminating with a finalizer and deletes
// it: gt2-c loses nothing locked, so the deletion needs no unlock. Then it
// gives the Terminating gt2-p the parent gt2-org: gt2-c would gain gt2-sec
// through gt2-p only to lose it, unjudged, when gt2-p is gone (a lock
// above a namespace being deleted is refused for the same reason). Refused:
// gt2-c never sees gt2-sec.
func TestTerminatingNamespaceTakesNoParent(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	gdNamespace(t, kube, "gt2-org", nil, nil)
	gdNamespace(t, kube, "gt2-p", nil, nil)
	gdNamespace(t, kube, "gt2-c", map[string]string{v1alpha1.LabelParent: "gt2-p"}, nil)
	createRoleBinding(t, kube, "gt2-org", "gt2-sec", "view", "gt2-auditors", locked)
	waitForView(t, dyn, viewRoleBindings, "gt2-org", "gt2-", map[string]viewItem{"gt2-sec": {Scope: "local", Source: "gt2-org"}})

	t.Log("gt2-ops is admin of gt2-p and gt2-c and may update gt2-org, gt2-p and gt2-c, and delete gt2-p; no unlock")
	ops := gdUser(t, "gt2-ops")
	for _, ns := range []string{"gt2-p", "gt2-c"} {
		gdBindUser(t, kube, ns, "ops-admin-gt2", "ClusterRole", "admin", "gt2-ops")
	}
	hdGrant(t, kube, "gt2-ops-ns", "", "gt2-ops", rbacv1.PolicyRule{
		APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch", "delete"},
		ResourceNames: []string{"gt2-org", "gt2-p", "gt2-c"},
	})
	hdWaitCan(t, ops, "delete", "namespaces/gt2-p")
	hdWaitCan(t, ops, "create", "rolebindings", "-n", "gt2-p")
	hdWaitCan(t, ops, "update", "namespaces/gt2-org")
	auditor := gdUser(t, "gt2-auditor", "gt2-auditors")
	if auditor.canI("get", "pods", "-n", "gt2-c") {
		t.Fatal("gt2-auditors may get pods in gt2-c before anything happened")
	}

	t.Log("as gt2-ops: a finalizer on its own RoleBinding in gt2-p, then gt2-p deleted (gt2-c loses nothing locked: no unlock needed)")
	release := holdTerminating(t, kube, ops, "gt2-p", "gt2-hold")

	t.Log("as gt2-ops: giving the Terminating gt2-p (which gt2-c inherits through) the parent gt2-org is refused")
	r := ops.run("label", "namespace", "gt2-p", hdParent+"=gt2-org")
	admitted := r.err == nil
	if admitted {
		t.Errorf("as gt2-ops: kubectl label namespace gt2-p %s=gt2-org succeeded, want it refused", hdParent)
		waitForView(t, dyn, viewRoleBindings, "gt2-c", "gt2-", map[string]viewItem{
			"gt2-sec": {Scope: "parent", Source: "gt2-org"}, "gt2-hold": {Scope: "parent", Source: "gt2-p"},
		})
		t.Logf("gt2-c inherits the locked gt2-sec through the Terminating gt2-p; gt2-auditors may get pods in gt2-c: %v", auditor.canI("get", "pods", "-n", "gt2-c"))
	} else {
		for _, w := range []string{`admission webhook "parents.implicit.dev" denied the request`, `namespace "gt2-p", in its subtree, is being deleted`} {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("stderr does not mention %q:\n%s", w, r.stderr)
			}
		}
		t.Logf("as gt2-ops, refused: %s", gdErrorLine(r.stderr))
		waitForView(t, dyn, viewRoleBindings, "gt2-c", "gt2-", map[string]viewItem{"gt2-hold": {Scope: "parent", Source: "gt2-p"}})
	}

	t.Log("the finalizer is removed: gt2-p goes")
	release()
	eventually(t, "gt2-p is gone", func(ctx context.Context) error {
		ns, err := kube.CoreV1().Namespaces().Get(ctx, "gt2-p", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errorf("gt2-p is %s", ns.Status.Phase)
	})
	waitForView(t, dyn, viewRoleBindings, "gt2-c", "gt2-", map[string]viewItem{})
	if admitted {
		t.Errorf("gt2-c lost the locked gt2-sec when gt2-p was gone, though nobody who may unlock it asked; gt2-auditors may get pods in gt2-c: %v",
			auditor.canI("get", "pods", "-n", "gt2-c"))
	}
}

// holdTerminating has user create RoleBinding hold in namespace ns with a
// finalizer, then delete ns, and waits until ns is Terminating, held by
// that finalizer. release removes the finalizer (also at cleanup).
func holdTerminating(t *testing.T, kube kubernetes.Interface, user gdKubectl, ns, hold string) (release func()) {
	t.Helper()
	user.ok("create", "rolebinding", hold, "-n", ns, "--clusterrole=view", "--group="+hold+"-nobody")
	finalizer := "example.com/" + hold
	user.ok("patch", "rolebinding", hold, "-n", ns, "--type=merge", "-p", fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, finalizer))
	release = func() {
		_, err := kube.RbacV1().RoleBindings(ns).Patch(context.Background(), hold, types.JSONPatchType,
			[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
			t.Errorf("removing the finalizer of %s/%s: %v", ns, hold, err)
		}
	}
	t.Cleanup(release)
	user.ok("delete", "namespace", ns, "--wait=false")
	eventually(t, ns+" is Terminating, held by "+hold+"'s finalizer", func(ctx context.Context) error {
		n, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.DeletionTimestamp == nil {
			return errorf("%s is %s", ns, n.Status.Phase)
		}
		rb, err := kube.RbacV1().RoleBindings(ns).Get(ctx, hold, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if rb.DeletionTimestamp == nil {
			return errorf("%s not deleted yet", hold)
		}
		return nil
	})
	return release
}
