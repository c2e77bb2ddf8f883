package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// ownGlobal is the global namespace of networkpolicies for this test's
// materializing server.
const ownGlobal = "own-global"

const ownConfig = `apiVersion: config.implicit.dev/v1alpha1
kind: ImplicitConfiguration
resources:
- {group: rbac.authorization.k8s.io, version: v1, resource: rolebindings}
- {group: rbac.authorization.k8s.io, version: v1, resource: roles}
- {group: networking.k8s.io, version: v1, resource: networkpolicies, globalNamespace: ` + ownGlobal + `, delivery: Materialize}
`

// TestMaterializedCopyMadeOwn: with NetworkPolicies materialized, the org
// namespace own-org (a tenant itself) holds a copy of the global own-deny.
// Its admin applies the org's own own-deny over the copy (kubectl apply, as
// a parent shadows an item for its subtree): the write makes the object the
// org's own, at admission (the own-copy webhook removes the label), so the
// materializer leaves it alone, the children's views show it (scope parent)
// and their copies follow it, and deleting the global source leaves it. The
// same write over the copy of a locked global item is refused, naming the
// lock, as a shadow of it would be.
func TestMaterializedCopyMadeOwn(t *testing.T) {
	kube, dyn := admin(t)
	ctx := t.Context()

	createNamespace(t, kube, ownGlobal, nil, nil)
	createNamespace(t, kube, "own-org", nil, nil)
	createNamespace(t, kube, "own-team-a", map[string]string{v1alpha1.LabelParent: "own-org"}, nil)
	createNamespace(t, kube, "own-other", nil, nil)
	t.Cleanup(func() { deleteAllCopies(t, kube) })

	config := filepath.Join(t.TempDir(), "materialize.yaml")
	if err := os.WriteFile(config, []byte(ownConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(cp.WorkDir(), "implicit-apiserver-sa.kubeconfig")
	t.Log("starting implicit-own-copy: networkpolicies delivered as copies, as the ServiceAccount; the suite's server answers the guards")
	s, err := cp.StartAggregated(ctx, controlplane.AggregatedServerOptions{
		Binary: os.Getenv(binaryEnv), Name: "implicit-own-copy",
		Args: append([]string{"-v=2", "--webhook-configuration=", "--config=" + config},
			identityArgs(kubeconfig)...),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("implicit-own-copy log tail:\n%s", s.LogTail(40))
		}
		_ = s.Stop()
		if err := checkNoForbidden(s.LogPath()); err != nil {
			t.Errorf("implicit-own-copy: %v", err)
		}
	})

	t.Log("own-global holds own-deny (every pod) and the locked own-locked: every tenant gets copies of both")
	createPolicy(t, kube, ownGlobal, "own-deny", "")
	lockedPolicy := policy(ownGlobal, "own-locked", "global-locked")
	lockedPolicy.Annotations = map[string]string{v1alpha1.AnnotationLocked: "true"}
	if _, err := kube.NetworkingV1().NetworkPolicies(ownGlobal).Create(ctx, lockedPolicy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := kube.NetworkingV1().NetworkPolicies(ownGlobal).Delete(context.Background(), "own-locked", metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting networkpolicy %s/own-locked: %v", ownGlobal, err)
		}
	})
	globalCopies := map[string]string{"own-deny": ownGlobal + ":", "own-locked": ownGlobal + ":global-locked"}
	want := map[string]map[string]string{"own-org": globalCopies, "own-team-a": globalCopies, "own-other": globalCopies}
	waitForCopies(t, kube, "every tenant has copies of the global own-deny and own-locked", want)

	gdBindUser(t, kube, "own-org", "own-org-admin", "ClusterRole", "admin", "own-org-admin")
	orgAdmin := gdUser(t, "own-org-admin")
	orgDeny := `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: own-deny
  namespace: own-org
spec:
  podSelector:
    matchLabels:
      app: org-deny
  policyTypes: [Ingress]
`
	t.Log("own-org's admin applies the org's own own-deny over its copy")
	var applied gdRun
	eventually(t, "the org admin's apply over the copy is admitted", func(context.Context) error {
		applied = orgAdmin.runWithInput(orgDeny, "apply", "-f", "-")
		return applied.err
	})
	if !strings.Contains(applied.stderr, "was a materialized copy of "+ownGlobal+"/own-deny") {
		t.Errorf("the apply's warnings do not say the copy became the org's own:\n%s", applied.stderr)
	}
	checkOrgDeny := func(when string) {
		t.Helper()
		np, err := kube.NetworkingV1().NetworkPolicies("own-org").Get(ctx, "own-deny", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if v1alpha1.IsMaterialized(np.Labels) || np.Labels[v1alpha1.LabelScope] != "" || np.Annotations[v1alpha1.AnnotationSourceUID] != "" ||
			np.Spec.PodSelector.MatchLabels["app"] != "org-deny" {
			t.Errorf("%s: own-org/own-deny is not the admin's: labels %v, annotations %v, selector %v",
				when, np.Labels, np.Annotations, np.Spec.PodSelector.MatchLabels)
		}
	}
	checkOrgDeny("right after the apply")

	t.Log("the views show it: local in own-org, parent in own-team-a")
	waitForView(t, dyn, viewNetworkPolicies, "own-org", "own-deny", map[string]viewItem{"own-deny": {Scope: "local", Source: "own-org"}})
	waitForView(t, dyn, viewNetworkPolicies, "own-team-a", "own-deny", map[string]viewItem{"own-deny": {Scope: "parent", Source: "own-org"}})
	want["own-org"] = map[string]string{"own-locked": ownGlobal + ":global-locked"}
	want["own-team-a"] = map[string]string{"own-deny": "own-org:org-deny", "own-locked": ownGlobal + ":global-locked"}
	waitForCopies(t, kube, "own-org's object is no copy; own-team-a's copy follows own-org's own-deny", want)
	checkOrgDeny("once the children's copies follow it")

	t.Log("the same apply over the copy of the locked own-locked is refused, naming the lock")
	orgAdmin.refusedWithInput(strings.ReplaceAll(orgDeny, "name: own-deny", "name: own-locked"),
		[]string{"materialized copy of the locked global source " + ownGlobal + "/own-locked", v1alpha1.AnnotationLocked, "can't be shadowed"},
		"apply", "-f", "-")
	np, err := kube.NetworkingV1().NetworkPolicies("own-org").Get(ctx, "own-locked", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !v1alpha1.IsMaterialized(np.Labels) || np.Spec.PodSelector.MatchLabels["app"] != "global-locked" {
		t.Errorf("own-org/own-locked changed: labels %v, selector %v", np.Labels, np.Spec.PodSelector.MatchLabels)
	}

	t.Log("deleting the global own-deny removes its copies, and leaves own-org's own")
	if err := kube.NetworkingV1().NetworkPolicies(ownGlobal).Delete(ctx, "own-deny", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want["own-other"] = map[string]string{"own-locked": ownGlobal + ":global-locked"}
	waitForCopies(t, kube, "the global own-deny's copies are gone; own-team-a's follows own-org's", want)
	checkOrgDeny("once the global source is deleted")
	// The materializer knew the object as its copy: no conflict reported.
	events, err := kube.CoreV1().Events("own-org").List(ctx, metav1.ListOptions{FieldSelector: "reason=MaterializeConflict"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Name == "own-deny" {
			t.Errorf("the object made own-org's own was reported as a conflict: %s", e.Message)
		}
	}
	t.Cleanup(func() {
		err := kube.NetworkingV1().NetworkPolicies("own-org").Delete(context.Background(), "own-deny", metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting networkpolicy own-org/own-deny: %v", err)
		}
	})
}
