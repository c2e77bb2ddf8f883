package integration

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
)

// discoveryRefresh bounds how long kube-apiserver's aggregator takes to see a
// kind that appeared in implicit-apiserver: it refreshes aggregated
// discovery and OpenAPI of an APIService every minute.
const discoveryRefresh = 2 * time.Minute

// TestConfiguredKindOverlay serves a CRD of the suite's own, configured with
// the Overlay strategy, whose CRD is created only now, after the server
// started: the view appears without a restart, merges a dev namespace's
// overlay onto the global guardrail field by field, and a lock keeps the
// global action.
func TestConfiguredKindOverlay(t *testing.T) {
	kube, dyn := admin(t)
	ctx := t.Context()
	ensureNamespace(t, kube, globalNS)
	createNamespace(t, kube, "cfg-dev", nil, nil)
	createNamespace(t, kube, "cfg-staging", nil, nil)

	t.Log("the server started with guardrails configured but no CRD: it is ready and has no guardrails view yet")
	if _, err := dyn.Resource(testfixture.GuardrailViews).Namespace("cfg-dev").List(ctx, metav1.ListOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("list of guardrails.implicit.dev before the CRD exists: %v, want NotFound", err)
	}

	t.Log("creating the CRD: the view must appear within seconds, no restart")
	if _, err := dyn.Resource(testfixture.CRDs).Create(ctx, testfixture.GuardrailCRD(false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The CRD stays for the rest of the suite: tests that restart
	// implicit-apiserver expect every kind kube-apiserver's discovery lists
	// (refreshed only every minute) to be served again after the restart.
	start := time.Now()
	eventually(t, "the CRD is served by kube-apiserver", func(ctx context.Context) error {
		_, err := dyn.Resource(testfixture.Guardrails).Namespace(globalNS).List(ctx, metav1.ListOptions{})
		return err
	})
	eventually(t, "guardrails.implicit.dev is served", func(ctx context.Context) error {
		_, err := dyn.Resource(testfixture.GuardrailViews).Namespace("cfg-dev").List(ctx, metav1.ListOptions{})
		return err
	})
	t.Logf("guardrails.implicit.dev served %s after the CRD was created", time.Since(start).Round(100*time.Millisecond))

	t.Log("global guardrail: rules a and b, action Enforce; dev overlay: rule c, action Audit")
	create := func(u *unstructured.Unstructured) {
		t.Helper()
		if _, err := dyn.Resource(testfixture.Guardrails).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating guardrail %s/%s: %v", u.GetNamespace(), u.GetName(), err)
		}
		t.Cleanup(func() {
			// The admin may unlock: the guards let it delete a locked guardrail.
			_ = dyn.Resource(testfixture.Guardrails).Namespace(u.GetNamespace()).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
		})
	}
	create(testfixture.Guardrail(globalNS, "cfg-baseline", false, map[string]any{"action": "Enforce", "rules": testfixture.GuardrailRules("a", "b")}))
	create(testfixture.Guardrail("cfg-dev", "cfg-baseline", false, map[string]any{"action": "Audit", "rules": testfixture.GuardrailRules("c")}))

	view := func(ctx context.Context) (*unstructured.Unstructured, error) {
		return dyn.Resource(testfixture.GuardrailViews).Namespace("cfg-dev").Get(ctx, "cfg-baseline", metav1.GetOptions{})
	}
	eventually(t, "the dev view merges the overlay: rules a, b, c and action Audit", func(ctx context.Context) error {
		u, err := view(ctx)
		if err != nil {
			return err
		}
		action, _, _ := unstructured.NestedString(u.Object, "spec", "action")
		if got := strings.Join(testfixture.RuleNames(u), ","); got != "a,b,c" || action != "Audit" {
			return errorf("rules %s action %s, want a,b,c and Audit", got, action)
		}
		if got := u.GetAnnotations()["implicit.dev/overlays"]; got != "cfg-dev/cfg-baseline" {
			return errorf("implicit.dev/overlays = %q, want cfg-dev/cfg-baseline", got)
		}
		if got := u.GetLabels()["implicit.dev/scope"]; got != "global" {
			return errorf("scope %q, want global (the base)", got)
		}
		if u.GetAPIVersion() != "implicit.dev/v1alpha1" || u.GetKind() != "Guardrail" {
			return errorf("apiVersion/kind %s/%s", u.GetAPIVersion(), u.GetKind())
		}
		return nil
	})

	t.Log("a watch on the dev view, from its list: the lock must arrive as one MODIFIED of cfg-baseline")
	list, err := dyn.Resource(testfixture.GuardrailViews).Namespace("cfg-dev").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := dyn.Resource(testfixture.GuardrailViews).Namespace("cfg-dev").Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	t.Log("locking the global guardrail: the view keeps Enforce, still adds rule c, and names spec.action in the conflict")
	withoutGuards(t, func() {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, converge, true, func(ctx context.Context) (bool, error) {
			g, err := dyn.Resource(testfixture.Guardrails).Namespace(globalNS).Get(ctx, "cfg-baseline", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			g.SetAnnotations(map[string]string{"implicit.dev/locked": "true"})
			_, err = dyn.Resource(testfixture.Guardrails).Namespace(globalNS).Update(ctx, g, metav1.UpdateOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	eventually(t, "the locked action stays", func(ctx context.Context) error {
		u, err := view(ctx)
		if err != nil {
			return err
		}
		action, _, _ := unstructured.NestedString(u.Object, "spec", "action")
		conflict := u.GetAnnotations()["implicit.dev/conflict"]
		if got := strings.Join(testfixture.RuleNames(u), ","); got != "a,b,c" || action != "Enforce" {
			return errorf("rules %s action %s, want a,b,c and Enforce", got, action)
		}
		if !strings.Contains(conflict, "spec.action") || !strings.Contains(conflict, "cfg-dev/cfg-baseline") {
			return errorf("implicit.dev/conflict = %q, want it to name spec.action and the overlay", conflict)
		}
		return nil
	})

	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("the watch ended before the lock arrived")
		}
		u, isU := ev.Object.(*unstructured.Unstructured)
		if !isU {
			t.Fatalf("watch event %s of a %T", ev.Type, ev.Object)
		}
		action, _, _ := unstructured.NestedString(u.Object, "spec", "action")
		if ev.Type != "MODIFIED" || u.GetName() != "cfg-baseline" || action != "Enforce" ||
			u.GetAPIVersion() != "implicit.dev/v1alpha1" || u.GetKind() != "Guardrail" {
			t.Errorf("watch event %s %s %s/%s action %q, want MODIFIED implicit.dev/v1alpha1 Guardrail cfg-baseline action Enforce",
				ev.Type, u.GetAPIVersion(), u.GetKind(), u.GetName(), action)
		}
	case <-time.After(converge):
		t.Fatal("no watch event for the lock")
	}

	t.Log("an overlay created under the lock is no shadow: the guard lets it in, the lock still holds")
	create(testfixture.Guardrail("cfg-staging", "cfg-baseline", false, map[string]any{"action": "Audit", "rules": testfixture.GuardrailRules("d")}))
	eventually(t, "the staging view adds rule d and keeps Enforce", func(ctx context.Context) error {
		u, err := dyn.Resource(testfixture.GuardrailViews).Namespace("cfg-staging").Get(ctx, "cfg-baseline", metav1.GetOptions{})
		if err != nil {
			return err
		}
		action, _, _ := unstructured.NestedString(u.Object, "spec", "action")
		if got := strings.Join(testfixture.RuleNames(u), ","); got != "a,b,d" || action != "Enforce" {
			return errorf("rules %s action %s, want a,b,d and Enforce", got, action)
		}
		if conflict := u.GetAnnotations()["implicit.dev/conflict"]; !strings.Contains(conflict, "spec.action") {
			return errorf("implicit.dev/conflict = %q, want spec.action", conflict)
		}
		return nil
	})

	t.Log("the guards cover the configured kind: an editor without unlock can't change the locked guardrail")
	editor := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg-guardrail-editor"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"policy.example.com"}, Resources: []string{"guardrails"},
			Verbs: []string{"get", "list", "update", "patch"}}},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, editor, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoles().Delete(context.Background(), editor.Name, metav1.DeleteOptions{})
	})
	gdBindUser(t, kube, globalNS, "cfg-editor", "ClusterRole", editor.Name, "cfg-editor")
	asEditor := gdUser(t, "cfg-editor")
	// The suite re-registered the guards for the default kinds above
	// (withoutGuards); the server puts guardrails back into their rules.
	eventually(t, "the locks guard refuses the editor's change of the locked guardrail", func(ctx context.Context) error {
		r := asEditor.run("patch", "guardrails.policy.example.com", "cfg-baseline", "-n", globalNS, "--dry-run=server",
			"--type=merge", "-p", `{"spec":{"action":"Audit"}}`)
		if r.err == nil {
			return errorf("the patch was admitted")
		}
		if !strings.Contains(r.stderr, "unlock") {
			return errorf("refused, but not for the lock: %s", r.stderr)
		}
		return nil
	})

	t.Log("the CRD's schema changes (a new field spec.mode): picked up without a restart")
	eventually(t, "updating the CRD", func(ctx context.Context) error {
		cur, err := dyn.Resource(testfixture.CRDs).Get(ctx, "guardrails.policy.example.com", metav1.GetOptions{})
		if err != nil {
			return err
		}
		next := testfixture.GuardrailCRD(true)
		next.SetResourceVersion(cur.GetResourceVersion())
		_, err = dyn.Resource(testfixture.CRDs).Update(ctx, next, metav1.UpdateOptions{})
		return err
	})
	changed := time.Now()

	t.Log("kubectl: table columns from the CRD, explain of the view (after kube-apiserver refreshes discovery)")
	kubectlEventually(t, "kubectl get guardrails.implicit.dev shows the CRD's Action column", func(ctx context.Context) error {
		out, _, err := cp.Kubectl(ctx, "get", "guardrails.implicit.dev", "-n", "cfg-dev")
		if err != nil {
			return err
		}
		header := strings.Join(strings.Fields(strings.SplitN(out, "\n", 2)[0]), " ")
		if header != "NAME ACTION SCOPE SOURCE AGE" {
			return errorf("header %q, want NAME ACTION SCOPE SOURCE AGE", header)
		}
		if !regexp.MustCompile(`cfg-baseline\s+Enforce\s+global\s+implicit-global\s`).MatchString(out) {
			return errorf("no cfg-baseline row with Enforce in\n%s", out)
		}
		return nil
	})
	t.Logf("FIGURES kubectl get shows the CRD's column %s after the CRD changed", time.Since(changed).Round(100*time.Millisecond))
	kubectlEventually(t, "the aggregated OpenAPI v2 document describes guardrails.implicit.dev", func(ctx context.Context) error {
		return checkOpenAPIv2(ctx, kube)
	})
	// The aggregator refetches the server's OpenAPI about once a minute
	// (docs/operations.md, "kubectl explain after the served group changes").
	t.Logf("FIGURES kube-apiserver's aggregated OpenAPI v2 has the CRD's new field %s after the CRD changed", time.Since(changed).Round(100*time.Millisecond))
	explainEventually(t, []string{"guardrails.implicit.dev.spec"}, "action", "rules", "mode", "How strictly the guardrail applies")
	t.Logf("FIGURES kubectl explain shows the CRD's new field %s after the CRD changed", time.Since(changed).Round(100*time.Millisecond))

	// kubectl has now explained the group (its HTTP cache holds the
	// document at its hash) and kube-apiserver's discovery has the kind:
	// the next schema change must reach explain without waiting for the
	// aggregator's refetch of the server's /openapi/v3 (the server answers
	// the hash no-cache, docs/operations.md).
	t.Log("the CRD's schema changes again (spec.mode's description): kubectl explain, its cache warm, shows it")
	const described = "Enforce, Audit or Warn: how strictly the guardrail applies."
	eventually(t, "updating the CRD's description of spec.mode", func(ctx context.Context) error {
		cur, err := dyn.Resource(testfixture.CRDs).Get(ctx, "guardrails.policy.example.com", metav1.GetOptions{})
		if err != nil {
			return err
		}
		versions, _, _ := unstructured.NestedSlice(cur.Object, "spec", "versions")
		v := versions[0].(map[string]any)
		if err := unstructured.SetNestedField(v, described, "schema", "openAPIV3Schema", "properties", "spec", "properties", "mode", "description"); err != nil {
			return err
		}
		if err := unstructured.SetNestedSlice(cur.Object, versions, "spec", "versions"); err != nil {
			return err
		}
		_, err = dyn.Resource(testfixture.CRDs).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	changed = time.Now()
	explainEventually(t, []string{"guardrails.implicit.dev.spec.mode"}, "Enforce, Audit or Warn")
	t.Logf("FIGURES kubectl explain (warm cache) shows the CRD's changed description %s after the change", time.Since(changed).Round(100*time.Millisecond))
}

// checkOpenAPIv2 checks that kube-apiserver's aggregated OpenAPI v2
// document describes the view with the CRD's schema, under the view's
// group-version-kind.
func checkOpenAPIv2(ctx context.Context, kube kubernetes.Interface) error {
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/openapi/v2").SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		return err
	}
	var doc struct {
		Definitions map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
			GVK        []map[string]string        `json:"x-kubernetes-group-version-kind"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return err
	}
	// kube-apiserver's own Guardrail definition has the same name; the
	// aggregator renames one of the two, so look the view's up by its
	// group-version-kind.
	for name, def := range doc.Definitions {
		for _, gvk := range def.GVK {
			if gvk["group"] == "implicit.dev" && gvk["version"] == "v1alpha1" && gvk["kind"] == "Guardrail" {
				if _, ok := def.Properties["spec"]; !ok {
					return errorf("definition %s of the view has no spec: %v", name, def.Properties)
				}
				return nil
			}
		}
	}
	return errorf("no definition in /openapi/v2 has the group-version-kind implicit.dev/v1alpha1 Guardrail")
}

// kubectlEventually is eventually with kube-apiserver's discovery refresh as
// the bound: kubectl finds kinds through the aggregator's discovery.
func kubectlEventually(t *testing.T, what string, check func(ctx context.Context) error) {
	t.Helper()
	eventuallyWithin(t, time.Second, discoveryRefresh, what, check)
}
