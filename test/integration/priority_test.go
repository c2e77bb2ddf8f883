package integration

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
)

// TestBarePluralIsTheSource checks that a view never shadows its source kind
// for kubectl's bare plural: `kubectl get guardrails` must mean the CRD's
// guardrails.policy.example.com, not guardrails.implicit.dev, though the
// CRD's group sorts after implicit.dev. A CRD's group has priority 1000, so
// the APIService must rank the views lower (groupPriorityMinimum 100, as
// metrics-server's); with a tie the group names would decide.
func TestBarePluralIsTheSource(t *testing.T) {
	kube, dyn := admin(t)
	ctx := t.Context()
	ensureNamespace(t, kube, globalNS)
	if _, err := dyn.Resource(testfixture.CRDs).Create(ctx, testfixture.GuardrailCRD(false), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	const name = "bare-plural"
	eventually(t, "a guardrail is created once kube-apiserver serves the CRD", func(ctx context.Context) error {
		_, err := dyn.Resource(testfixture.Guardrails).Namespace(globalNS).Create(ctx,
			testfixture.Guardrail(globalNS, name, false, map[string]any{"action": "Audit"}), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	t.Cleanup(func() {
		_ = dyn.Resource(testfixture.Guardrails).Namespace(globalNS).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	kubectlEventually(t, "both the CRD and its view are in kubectl's discovery", func(ctx context.Context) error {
		out, _, err := cp.Kubectl(ctx, "api-resources", "-o", "name")
		if err != nil {
			return err
		}
		for _, want := range []string{"guardrails.policy.example.com", "guardrails.implicit.dev"} {
			if !strings.Contains(out, want+"\n") {
				return errorf("no %s in kubectl api-resources", want)
			}
		}
		return nil
	})
	t.Log("kubectl get guardrails (bare plural) lists the CRD's objects")
	out, _, err := cp.Kubectl(ctx, "get", "guardrails", "-n", globalNS, "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	if want := "guardrail.policy.example.com/" + name; !strings.Contains(out, want) {
		t.Errorf("kubectl get guardrails printed\n%s\nwant %s: the view shadows its source kind", out, want)
	}
}
