package kinds

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

var guardrails = schema.GroupVersionResource{Group: "policy.example.com", Version: "v1", Resource: "guardrails"}

// TestWithHostNames: a configured kind completed with the host's names keeps
// its options and presents unstructured objects of the view's kind.
func TestWithHostNames(t *testing.T) {
	t.Parallel()
	k := Kind{Source: guardrails, Strategy: merge.Overlay, Delivery: DeliveryMaterialize, GlobalNamespace: "org"}
	if k.Presented() || k.Typed() {
		t.Fatalf("a configured kind before the host answers: presented %v, typed %v; want neither", k.Presented(), k.Typed())
	}
	got := k.WithHostNames(HostNames{Kind: "Guardrail", Singular: "guardrail", Model: "com.example.policy.v1.Guardrail",
		Columns: []PrinterColumn{{Name: "Action", Type: "string", Priority: 1, JSONPath: ".spec.action"}}}, v1alpha1.SchemeGroupVersion)
	if got.Strategy != merge.Overlay || !got.Materialized() || got.GlobalNamespace != "org" || got.Source != guardrails {
		t.Errorf("options lost: %+v", got)
	}
	if !got.Presented() || !got.Unstructured() {
		t.Errorf("presented %v, unstructured %v; want both", got.Presented(), got.Unstructured())
	}
	item, ok := got.New().(*unstructured.Unstructured)
	if !ok || item.GroupVersionKind() != v1alpha1.SchemeGroupVersion.WithKind("Guardrail") {
		t.Errorf("New() = %#v, want an unstructured implicit.dev/v1alpha1 Guardrail", got.New())
	}
	list, ok := got.NewList().(*unstructured.UnstructuredList)
	if !ok || list.GroupVersionKind() != v1alpha1.SchemeGroupVersion.WithKind("GuardrailList") {
		t.Errorf("NewList() = %#v, want an unstructured implicit.dev/v1alpha1 GuardrailList", got.NewList())
	}
	if len(got.Columns) != 1 || got.Columns[0].Priority != 1 || len(got.JSONPaths) != 1 || got.JSONPaths[0] != ".spec.action" || got.Cells != nil {
		t.Errorf("columns %+v paths %q cells set %v; want one column with its path and no Cells", got.Columns, got.JSONPaths, got.Cells != nil)
	}
}

func TestConfigure(t *testing.T) {
	t.Parallel()
	rb := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
	tests := []struct {
		name      string
		spec      Spec
		wantTyped bool
		want      []string // problems, by a word each must contain
	}{
		{name: "a built-in kind keeps its presentation", spec: Spec{Source: rb, Strategy: "Overlay"}, wantTyped: true},
		{name: "a configured kind", spec: Spec{Source: guardrails, Delivery: "Materialize", AggregateTo: []string{"view"}}},
		{name: "secrets", spec: Spec{Source: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}}, want: []string{"secrets can't be served"}},
		{name: "our own group", spec: Spec{Source: schema.GroupVersionResource{Group: v1alpha1.GroupName, Version: "v1alpha1", Resource: "rolebindings"}}, want: []string{"implicit-apiserver's own"}},
		{name: "bad strategy and delivery", spec: Spec{Source: guardrails, Strategy: "Merge", Delivery: "Copy"}, want: []string{`strategy "Merge"`, `delivery "Copy"`}},
		{name: "aggregateTo on a built-in kind", spec: Spec{Source: rb, AggregateTo: []string{"view"}}, want: []string{"aggregateTo is for configured kinds"}},
		{name: "aggregateTo twice and unknown", spec: Spec{Source: guardrails, AggregateTo: []string{"view", "view", "owner"}}, want: []string{"listed twice", `"owner"`}},
		{name: "no version, bad resource", spec: Spec{Source: schema.GroupVersionResource{Resource: "Guard.Rails"}}, want: []string{"version is required", `resource "Guard.Rails"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k, problems := Configure(tc.spec)
			if len(problems) != len(tc.want) {
				t.Fatalf("problems = %q, want %d containing %q", problems, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(problems[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, problems[i], w)
				}
			}
			if len(tc.want) > 0 {
				return
			}
			if k.Source != tc.spec.Source || k.Typed() != tc.wantTyped || k.Presented() != tc.wantTyped {
				t.Errorf("kind %v: typed %v presented %v, want %v", k.Source, k.Typed(), k.Presented(), tc.wantTyped)
			}
			if string(k.Strategy) != tc.spec.Strategy && !(tc.spec.Strategy == "" && k.Strategy == merge.Replace) {
				t.Errorf("strategy %q, want %q", k.Strategy, tc.spec.Strategy)
			}
		})
	}
}
