package testfixture

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// CRDs are apiextensions.k8s.io/v1 CustomResourceDefinitions.
	CRDs = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	// Guardrails are the sources of the suites' own kind, GuardrailViews
	// their views.
	Guardrails     = schema.GroupVersionResource{Group: "policy.example.com", Version: "v1", Resource: "guardrails"}
	GuardrailViews = schema.GroupVersionResource{Group: "implicit.dev", Version: "v1alpha1", Resource: "guardrails"}
)

// GuardrailCRD is the CustomResourceDefinition of the integration and fleet
// suites' own kind: rules merge by name (a list-map), action is a scalar,
// with an Action printer column. withMode adds the field spec.mode, for a
// schema change.
func GuardrailCRD(withMode bool) *unstructured.Unstructured {
	spec := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"action": map[string]any{"type": "string", "enum": []any{"Enforce", "Audit"}},
			"rules": map[string]any{
				"type":                       "array",
				"x-kubernetes-list-type":     "map",
				"x-kubernetes-list-map-keys": []any{"name"},
				"items": map[string]any{
					"type":     "object",
					"required": []any{"name"},
					"properties": map[string]any{
						"name":  map[string]any{"type": "string"},
						"match": map[string]any{"type": "string"},
					},
				},
			},
		},
	}
	if withMode {
		spec["properties"].(map[string]any)["mode"] = map[string]any{"type": "string", "description": "How strictly the guardrail applies."}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "guardrails.policy.example.com"},
		"spec": map[string]any{
			"group": "policy.example.com",
			"scope": "Namespaced",
			"names": map[string]any{"plural": "guardrails", "singular": "guardrail", "kind": "Guardrail", "listKind": "GuardrailList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type":       "object",
					"properties": map[string]any{"spec": spec},
				}},
				"additionalPrinterColumns": []any{
					map[string]any{"name": "Action", "type": "string", "jsonPath": ".spec.action"},
				},
			}},
		},
	}}
}

// Guardrail is a guardrail source object, locked or not.
func Guardrail(namespace, name string, locked bool, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "policy.example.com/v1",
		"kind":       "Guardrail",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       spec,
	}}
	if locked {
		u.SetAnnotations(map[string]string{"implicit.dev/locked": "true"})
	}
	return u
}

// GuardrailRules are rules of the given names, each matching "match-<name>".
func GuardrailRules(names ...string) []any {
	out := make([]any, 0, len(names))
	for _, n := range names {
		out = append(out, map[string]any{"name": n, "match": "match-" + n})
	}
	return out
}

// RuleNames returns the names of a guardrail's rules, in order.
func RuleNames(u *unstructured.Unstructured) []string {
	rs, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	var out []string
	for _, r := range rs {
		if m, ok := r.(map[string]any); ok {
			out = append(out, fmt.Sprint(m["name"]))
		}
	}
	return out
}
