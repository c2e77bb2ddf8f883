package offline_test

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/offline"
)

// viewObject is the view object name of resource in namespace.
func viewObject(t *testing.T, w *offline.World, namespace, resource, name string) *unstructured.Unstructured {
	t.Helper()
	items, err := w.View(namespace, resource)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it.Name == name {
			return it.Object
		}
	}
	t.Fatalf("%s has no %s %s", namespace, resource, name)
	return nil
}

// TestOverlayRoleBinding: a tenant's RoleBinding that asks for an overlay
// merges onto the global one with rbac/v1's schema: labels merge key by
// key, subjects (an atomic list) are the overlay's.
func TestOverlayRoleBinding(t *testing.T) {
	t.Parallel()
	w, err := build(t, writeFiles(t, map[string]string{"a.yaml": `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: shared, namespace: implicit-global, labels: {from-global: "yes"}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: everyone}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: shared, namespace: team, labels: {from-team: "yes"}, annotations: {implicit.dev/merge: overlay}}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: olivia}]
`}))
	if err != nil {
		t.Fatal(err)
	}
	u := viewObject(t, w, "team", "rolebindings", "shared")
	labels := u.GetLabels()
	if labels["from-global"] != "yes" || labels["from-team"] != "yes" || labels["implicit.dev/scope"] != "global" {
		t.Errorf("labels %v, want from-global and from-team merged, scope global (the base)", labels)
	}
	subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
	want := []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "olivia"}}
	if !reflect.DeepEqual(subjects, want) {
		t.Errorf("subjects %v, want the overlay's %v", subjects, want)
	}
	if got := u.GetAnnotations()["implicit.dev/overlays"]; got != "team/shared" {
		t.Errorf("implicit.dev/overlays = %q, want team/shared", got)
	}
}

// TestOverlayCRDKind: a configured kind with the Overlay strategy merges
// with the schema of its CustomResourceDefinition in the files: rules, a
// list-map keyed by name, gain the dev rule; a lock keeps the global action.
func TestOverlayCRDKind(t *testing.T) {
	t.Parallel()
	crd, err := yaml.Marshal(testfixture.GuardrailCRD(false).Object)
	if err != nil {
		t.Fatal(err)
	}
	doc := func(u *unstructured.Unstructured) string {
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		return "---\n" + string(b)
	}
	files := map[string]string{
		"config.yaml": `apiVersion: config.implicit.dev/v1alpha1
kind: ImplicitConfiguration
resources:
- {group: policy.example.com, version: v1, resource: guardrails, strategy: Overlay}
`,
		"crd.yaml": string(crd),
		"guardrails.yaml": doc(testfixture.Guardrail("implicit-global", "baseline", false, map[string]any{"action": "Enforce", "rules": testfixture.GuardrailRules("a", "b")})) +
			doc(testfixture.Guardrail("dev", "baseline", false, map[string]any{"action": "Audit", "rules": testfixture.GuardrailRules("c")})) +
			doc(testfixture.Guardrail("implicit-global", "locked", true, map[string]any{"action": "Enforce", "rules": testfixture.GuardrailRules("a")})) +
			doc(testfixture.Guardrail("dev", "locked", false, map[string]any{"action": "Audit", "rules": testfixture.GuardrailRules("d")})),
	}
	w, err := build(t, writeFiles(t, files))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, rules, action, conflict string }{
		{name: "baseline", rules: "a,b,c", action: "Audit"},
		{name: "locked", rules: "a,d", action: "Enforce", conflict: "spec.action"},
	} {
		u := viewObject(t, w, "dev", "guardrails", tt.name)
		action, _, _ := unstructured.NestedString(u.Object, "spec", "action")
		if got := strings.Join(testfixture.RuleNames(u), ","); got != tt.rules || action != tt.action {
			t.Errorf("%s: rules %s action %s, want %s and %s", tt.name, got, action, tt.rules, tt.action)
		}
		if c := u.GetAnnotations()["implicit.dev/conflict"]; !strings.Contains(c, tt.conflict) || (tt.conflict == "") != (c == "") {
			t.Errorf("%s: implicit.dev/conflict = %q, want %q", tt.name, c, tt.conflict)
		}
	}
}
