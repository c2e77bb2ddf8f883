package fleet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
)

// kindConverge bounds how long a configured kind takes to be served once its
// CRD exists: the CRD is established, the server's next poll (every 3 s) sees
// it, and the member's and the hub's informers sync.
const kindConverge = 90 * time.Second

// ensureGuardrailCRD creates the Guardrail CRD on a cluster (unless it is
// there from an earlier run) and waits until it is established and served.
// The CRD stays for the rest of the suite: a view kube-apiserver's discovery
// lists must still be served if a server restarts.
func ensureGuardrailCRD(t *testing.T, name string, dyn dynamic.Interface) {
	t.Helper()
	if _, err := dyn.Resource(testfixture.CRDs).Create(t.Context(), testfixture.GuardrailCRD(false), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("%s: creating the Guardrail CRD: %v", name, err)
	}
	eventually(t, kindConverge, name+": the Guardrail CRD is established and served", func(ctx context.Context) error {
		crd, err := dyn.Resource(testfixture.CRDs).Get(ctx, "guardrails.policy.example.com", metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		established := false
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				established = true
			}
		}
		if !established {
			return fmt.Errorf("not Established yet: %v", conds)
		}
		_, err = dyn.Resource(testfixture.Guardrails).Namespace(globalNS).List(ctx, metav1.ListOptions{})
		return err
	})
}

func hasGuardrailCRD(t *testing.T, dyn dynamic.Interface) bool {
	t.Helper()
	_, err := dyn.Resource(testfixture.CRDs).Get(t.Context(), "guardrails.policy.example.com", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// createGuardrail creates u on a cluster and deletes it at cleanup.
func createGuardrail(t *testing.T, dyn dynamic.Interface, u *unstructured.Unstructured) {
	t.Helper()
	if _, err := dyn.Resource(testfixture.Guardrails).Namespace(u.GetNamespace()).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating guardrail %s/%s: %v", u.GetNamespace(), u.GetName(), err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(testfixture.Guardrails).Namespace(u.GetNamespace()).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
	})
}

// eventually polls check every half second until it returns nil, failing
// the test with its last error after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	testwait.Within(t, 500*time.Millisecond, timeout, what, check)
}

// guardView checks a member's view item of the hub's guardrail: the hub's,
// global, with the given action, rules and overlays.
func guardView(action, rules, overlays string) func(*unstructured.Unstructured) error {
	return func(u *unstructured.Unstructured) error {
		if err := scopeFrom("global", globalNS, "hub")(u); err != nil {
			return err
		}
		got, _, _ := unstructured.NestedString(u.Object, "spec", "action")
		if r := strings.Join(testfixture.RuleNames(u), ","); got != action || r != rules {
			return fmt.Errorf("action %s rules %s, want %s and %s", got, r, action, rules)
		}
		if o := u.GetAnnotations()["implicit.dev/overlays"]; o != overlays {
			return fmt.Errorf("implicit.dev/overlays = %q, want %q", o, overlays)
		}
		if u.GetAPIVersion() != "implicit.dev/v1alpha1" || u.GetKind() != "Guardrail" {
			return fmt.Errorf("apiVersion/kind %s/%s, want implicit.dev/v1alpha1/Guardrail", u.GetAPIVersion(), u.GetKind())
		}
		return nil
	}
}

// TestHubConfiguredKind serves a configured CRD (Overlay) whose global
// sources are on the hub: once the CRD exists on the hub and a member, the
// member's tenant view shows the hub's guardrail, marked as the hub's, and
// merges a member-local overlay onto it; a member that gets the CRD later
// serves the view without a restart.
func TestHubConfiguredKind(t *testing.T) {
	_, hubDyn := clients(t, hub)
	kube1, dyn1 := clients(t, member1)
	kube2, dyn2 := clients(t, member2)
	member1HadCRD := hasGuardrailCRD(t, dyn1)

	t.Log("the Guardrail CRD on the hub and on member-2, not on member-1")
	ensureGuardrailCRD(t, "hub", hubDyn)
	ensureGuardrailCRD(t, "member-2", dyn2)
	createNamespace(t, kube2, "fl-guard-team", "")
	createNamespace(t, kube1, "fl-guard-team", "")

	t.Log("a global guardrail on the hub: action Enforce, rules a and b")
	createGuardrail(t, hubDyn, testfixture.Guardrail(globalNS, "fl-baseline", false, map[string]any{"action": "Enforce", "rules": testfixture.GuardrailRules("a", "b")}))

	get := func(dyn dynamic.Interface) func(ctx context.Context) (*unstructured.Unstructured, error) {
		return func(ctx context.Context) (*unstructured.Unstructured, error) {
			return dyn.Resource(testfixture.GuardrailViews).Namespace("fl-guard-team").Get(ctx, "fl-baseline", metav1.GetOptions{})
		}
	}
	start := time.Now()
	eventually(t, kindConverge, "member-2: the tenant's view shows the hub's guardrail", func(ctx context.Context) error {
		u, err := get(dyn2)(ctx)
		if err != nil {
			return err
		}
		return guardView("Enforce", "a,b", "")(u)
	})
	t.Logf("member-2 serves the hub's guardrail %s after it was created", time.Since(start).Round(100*time.Millisecond))

	t.Log("a member-2 local overlay of the same name: action Audit, rule c")
	createGuardrail(t, dyn2, testfixture.Guardrail("fl-guard-team", "fl-baseline", false, map[string]any{"action": "Audit", "rules": testfixture.GuardrailRules("c")}))
	eventually(t, converge, "member-2: the view merges the local overlay onto the hub's guardrail", func(ctx context.Context) error {
		u, err := get(dyn2)(ctx)
		if err != nil {
			return err
		}
		return guardView("Audit", "a,b,c", "fl-guard-team/fl-baseline")(u)
	})

	if !member1HadCRD {
		t.Log("member-1 has no Guardrail CRD: it serves no guardrails.implicit.dev")
		if _, err := get(dyn1)(t.Context()); !apierrors.IsNotFound(err) {
			t.Errorf("member-1's guardrails.implicit.dev before its CRD exists: %v, want NotFound", err)
		}
	}
	t.Log("the CRD on member-1: its view appears without a restart and shows the hub's guardrail")
	pid := implicit1.Process()
	ensureGuardrailCRD(t, "member-1", dyn1)
	start = time.Now()
	eventually(t, kindConverge, "member-1: the tenant's view shows the hub's guardrail", func(ctx context.Context) error {
		u, err := get(dyn1)(ctx)
		if err != nil {
			return err
		}
		return guardView("Enforce", "a,b", "")(u)
	})
	t.Logf("member-1 serves the hub's guardrail %s after its CRD was established", time.Since(start).Round(100*time.Millisecond))
	if implicit1.Process() != pid {
		t.Errorf("member-1's implicit-apiserver was restarted")
	}
}
