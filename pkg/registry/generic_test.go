package registry_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

var (
	viewGV     = schema.GroupVersion{Group: group, Version: "v1alpha1"}
	guardrails = schema.GroupVersionResource{Group: "policy.example.com", Version: "v1", Resource: "guardrails"}
)

// guardrailColumns are the additionalPrinterColumns of the Guardrail CRD.
var guardrailColumns = []kinds.PrinterColumn{
	{Name: "Action", Type: "string", Description: "What the guardrail does.", JSONPath: ".spec.action"},
	{Name: "Rule", Type: "string", Description: "The first rule's name.", Priority: 1, JSONPath: ".spec.rules[*].name"},
	{Name: "Limit", Type: "integer", JSONPath: ".spec.limit"},
	{Name: "Ratio", Type: "number", JSONPath: ".spec.ratio"},
	{Name: "Enforced", Type: "boolean", JSONPath: ".spec.enforced"},
	{Name: "Owner", Type: "string", JSONPath: ".spec.owner"},
	{Name: "Created", Type: "date", JSONPath: ".metadata.creationTimestamp"},
}

func guardrailNames() kinds.HostNames {
	return kinds.HostNames{
		Kind:     "Guardrail",
		Singular: "guardrail",
		Model:    "com.example.policy.v1.Guardrail",
		Columns:  guardrailColumns,
	}
}

func guardrailKind(t *testing.T) kinds.Kind {
	t.Helper()
	k := kinds.Kind{Source: guardrails}.WithHostNames(guardrailNames(), viewGV)
	if _, err := registry.Cells(k); err != nil {
		t.Fatalf("Cells: %v", err)
	}
	return k
}

// guardrail is a view item of the Guardrail kind, created five days ago.
func guardrail(namespace, name string, scope merge.Scope, sourceNS string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(viewGV.WithKind("Guardrail"))
	m := viewMeta(namespace, name, scope, sourceNS)
	u.SetNamespace(m.Namespace)
	u.SetName(m.Name)
	u.SetLabels(m.Labels)
	u.SetCreationTimestamp(metav1.NewTime(time.Now().Add(-5*24*time.Hour - time.Minute)))
	return u
}

func TestGenericKind(t *testing.T) {
	t.Parallel()
	k := guardrailKind(t)
	if k.Source != guardrails || k.Resource() != "guardrails" || k.Kind != "Guardrail" || k.Singular != "guardrail" || k.Model != "com.example.policy.v1.Guardrail" {
		t.Errorf("kind = %v %s %s %s, want the source's names", k.Source, k.Kind, k.Singular, k.Model)
	}
	if !k.Unstructured() {
		t.Error("a generic kind is not Unstructured()")
	}
	tests := []struct {
		name    string
		newFunc func() runtime.Object
		want    schema.GroupVersionKind
	}{
		{name: "New", newFunc: k.New, want: viewGV.WithKind("Guardrail")},
		{name: "NewList", newFunc: k.NewList, want: viewGV.WithKind("GuardrailList")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			obj := tt.newFunc()
			if _, ok := obj.(runtime.Unstructured); !ok {
				t.Fatalf("%s() = %T, want unstructured", tt.name, obj)
			}
			if got := obj.GetObjectKind().GroupVersionKind(); got != tt.want {
				t.Errorf("%s() kind = %v, want the view's %v", tt.name, got, tt.want)
			}
			if tt.newFunc() == obj {
				t.Errorf("%s() returns the same object twice", tt.name)
			}
		})
	}
	var names []string
	for _, c := range k.Columns {
		names = append(names, c.Name)
	}
	if want := []string{"Action", "Rule", "Limit", "Ratio", "Enforced", "Owner", "Created"}; !reflect.DeepEqual(names, want) {
		t.Errorf("columns = %q, want %q", names, want)
	}
	if c := k.Columns[1]; c.Type != "string" || c.Priority != 1 || c.Description != "The first rule's name." {
		t.Errorf("column Rule = %+v, want its type, priority and description kept", c)
	}
}

func TestGenericCells(t *testing.T) {
	t.Parallel()
	created := metav1.NewTime(time.Now().Add(-3*time.Hour - time.Minute)).UTC().Format(time.RFC3339)
	content := func(spec any) map[string]any {
		return map[string]any{
			"apiVersion": "implicit.dev/v1alpha1",
			"kind":       "Guardrail",
			"metadata":   map[string]any{"name": "g", "namespace": "team-a", "creationTimestamp": created},
			"spec":       spec,
		}
	}
	full := map[string]any{
		"action":   " deny ",
		"rules":    []any{map[string]any{"name": "allow-dns"}, map[string]any{"name": "deny-egress"}},
		"limit":    int64(3),
		"ratio":    0.5,
		"enforced": true,
	}
	tests := []struct {
		name    string
		columns []kinds.PrinterColumn
		obj     runtime.Object
		want    []any
	}{
		{
			// A string as kube-apiserver's table of the CRD itself shows it
			// (apiextensions-apiserver's table convertor): untrimmed.
			name:    "every column type; a missing field is nil",
			columns: guardrailColumns,
			obj:     &unstructured.Unstructured{Object: content(full)},
			want:    []any{" deny ", "allow-dns", int64(3), 0.5, true, nil, "3h1m"},
		},
		{
			name:    "numbers decoded from JSON as floats",
			columns: guardrailColumns,
			obj:     &unstructured.Unstructured{Object: content(map[string]any{"limit": float64(7), "ratio": int64(2), "enforced": false})},
			want:    []any{nil, nil, int64(7), float64(2), false, nil, "3h1m"},
		},
		{
			name:    "no spec",
			columns: guardrailColumns,
			obj:     &unstructured.Unstructured{Object: content(nil)},
			want:    []any{nil, nil, nil, nil, nil, nil, "3h1m"},
		},
		{
			name:    "empty rules",
			columns: guardrailColumns[1:2],
			obj:     &unstructured.Unstructured{Object: content(map[string]any{"rules": []any{}})},
			want:    []any{nil},
		},
		{
			name:    "no columns",
			columns: nil,
			obj:     &unstructured.Unstructured{Object: content(full)},
			want:    []any{},
		},
		{
			// As kube-apiserver prints a CRD's string column holding an object or a list.
			name: "objects and lists in a string column print as JSON",
			columns: []kinds.PrinterColumn{
				{Name: "Rules", Type: "string", JSONPath: ".spec.rules"},
				{Name: "First", Type: "string", JSONPath: ".spec.rules[0]"},
			},
			obj:  &unstructured.Unstructured{Object: content(full)},
			want: []any{`[{"name":"allow-dns"},{"name":"deny-egress"}]`, `{"name":"allow-dns"}`},
		},
		{
			name: "a typed object, through the unstructured converter",
			columns: []kinds.PrinterColumn{
				{Name: "Role", Type: "string", JSONPath: ".roleRef.name"},
				{Name: "Subject", Type: "string", JSONPath: ".subjects[*].name"},
				{Name: "Created", Type: "date", JSONPath: ".metadata.creationTimestamp"},
			},
			obj:  viewRoleBinding("team-a", "rb", merge.ScopeGlobal, "implicit-global"),
			want: []any{"view", "alice", nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			names := guardrailNames()
			names.Columns = tt.columns
			k := kinds.Kind{Source: guardrails}.WithHostNames(names, viewGV)
			cells, err := registry.Cells(k)
			if err != nil {
				t.Fatalf("Cells: %v", err)
			}
			got := cells(tt.obj)
			if len(got) != len(k.Columns) {
				t.Fatalf("%d cells for %d columns", len(got), len(k.Columns))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("cells = %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestGenericBadColumn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		jsonPath string
	}{
		{name: "unclosed bracket", jsonPath: ".spec.rules[0"},
		{name: "bad filter", jsonPath: ".spec.rules[?(@.name ~ 1)]"},
		{name: "nested template", jsonPath: "{.spec.action}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			names := guardrailNames()
			names.Columns = append(append([]kinds.PrinterColumn(nil), guardrailColumns...), kinds.PrinterColumn{Name: "Broken", Type: "string", JSONPath: tt.jsonPath})
			_, err := registry.Cells(kinds.Kind{Source: guardrails}.WithHostNames(names, viewGV))
			if err == nil {
				t.Fatalf("Cells accepted JSONPath %q", tt.jsonPath)
			}
			for _, want := range []string{`"Broken"`, "guardrails.policy.example.com", tt.jsonPath} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
		})
	}
}

// TestGenericTable checks the table of a generic view as kubectl gets it:
// NAME, the CRD's columns, SCOPE, SOURCE and AGE, and with -o wide LOCKED,
// OVERLAYS and CONFLICT.
func TestGenericTable(t *testing.T) {
	t.Parallel()
	k := guardrailKind(t)
	items := []runtime.Object{
		guardrail("team-a", "org-egress", merge.ScopeGlobal, "implicit-global", map[string]any{
			"action": "deny", "limit": int64(2), "enforced": true,
			"rules": []any{map[string]any{"name": "deny-egress"}},
		}),
		guardrail("team-a", "local", merge.ScopeLocal, "team-a", map[string]any{"action": "audit", "ratio": 0.25}),
		guardrail("team-b", "other", merge.ScopeLocal, "team-b", map[string]any{"action": "allow"}),
	}
	s := registry.NewStorage(group, k, newFakeViewer("guardrails", items...))
	ctx := genericapirequest.WithNamespace(context.Background(), "team-a")
	list, err := s.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if _, ok := list.(*unstructured.UnstructuredList); !ok {
		t.Fatalf("List returned %T, want an unstructured list", list)
	}
	table, err := s.ConvertToTable(ctx, list, &metav1.TableOptions{})
	if err != nil {
		t.Fatalf("ConvertToTable: %v", err)
	}
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	wantNames := []string{"Name", "Action", "Rule", "Limit", "Ratio", "Enforced", "Owner", "Created", "Scope", "Source", "Age", "Locked", "Overlays", "Conflict"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("columns = %q, want %q", names, wantNames)
	}
	if table.ResourceVersion != fakeRV {
		t.Errorf("table resourceVersion = %q, want %q", table.ResourceVersion, fakeRV)
	}
	// Rows in the list's order: by namespace/name, as kube-apiserver lists.
	want := [][]any{
		{"local", "audit", nil, nil, 0.25, nil, nil, "5d", "local", "team-a", "5d", "false", "<none>", "<none>"},
		{"org-egress", "deny", "deny-egress", int64(2), nil, true, nil, "5d", "global", "implicit-global", "5d", "false", "<none>", "<none>"},
	}
	if len(table.Rows) != len(want) {
		t.Fatalf("%d rows, want %d: %v", len(table.Rows), len(want), table.Rows)
	}
	for i, r := range table.Rows {
		if !reflect.DeepEqual(r.Cells, want[i]) {
			t.Errorf("row %d = %#v, want %#v", i, r.Cells, want[i])
		}
		if _, ok := r.Object.Object.(*unstructured.Unstructured); !ok {
			t.Errorf("row %d object = %T, want the unstructured item", i, r.Object.Object)
		}
	}

	one, err := s.Get(ctx, "local", &metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	single, err := s.ConvertToTable(ctx, one, nil)
	if err != nil {
		t.Fatalf("ConvertToTable of one item: %v", err)
	}
	if len(single.Rows) != 1 || !reflect.DeepEqual(single.Rows[0].Cells, want[0]) {
		t.Errorf("rows of one item = %v, want %v", single.Rows, want[:1])
	}
}

// TestGenericRoleBindingTable checks a built-in kind served generically (an
// other version of it, say) prints its typed and unstructured items alike.
func TestGenericRoleBindingTable(t *testing.T) {
	t.Parallel()
	k := kinds.Kind{Source: rbacv1.SchemeGroupVersion.WithResource("rolebindings")}.WithHostNames(kinds.HostNames{
		Kind:    "RoleBinding",
		Columns: []kinds.PrinterColumn{{Name: "Role", Type: "string", JSONPath: ".roleRef.name"}},
	}, viewGV)
	if _, err := registry.Cells(k); err != nil {
		t.Fatalf("Cells: %v", err)
	}
	typed := viewRoleBinding("team-a", "rb", merge.ScopeGlobal, "implicit-global")
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		obj  runtime.Object
	}{
		{name: "typed", obj: typed},
		{name: "unstructured", obj: &unstructured.Unstructured{Object: content}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := registry.NewStorage(group, k, newFakeViewer("rolebindings"))
			table, err := s.ConvertToTable(context.Background(), tt.obj, &metav1.TableOptions{})
			if err != nil {
				t.Fatalf("ConvertToTable: %v", err)
			}
			want := []any{"rb", "view", "global", "implicit-global", "<unknown>", "false", "<none>", "<none>"}
			if len(table.Rows) != 1 || !reflect.DeepEqual(table.Rows[0].Cells, want) {
				t.Errorf("rows = %v, want one row %v", table.Rows, want)
			}
		})
	}
}
