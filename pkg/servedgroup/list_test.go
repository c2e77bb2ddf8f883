package servedgroup

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

const (
	guardrailModel = "com.example.policy.v1.Guardrail"
	gvkExt         = "x-kubernetes-group-version-kind"
)

var (
	policyV1   = schema.GroupVersion{Group: "policy.example.com", Version: "v1"}
	guardrails = policyV1.WithResource("guardrails")
)

func hostSchema(t *testing.T, raw string) *spec.Schema {
	t.Helper()
	s := &spec.Schema{}
	if err := json.Unmarshal([]byte(raw), s); err != nil {
		t.Fatalf("schema %s: %v", raw, err)
	}
	return s
}

// TestListSchemaDefinitions renders a model and its synthesized list as the
// group's OpenAPI definitions: references are re-pointed through ref.
func TestListSchemaDefinitions(t *testing.T) {
	t.Parallel()
	list := ListSchema(guardrailModel, policyV1.WithKind("GuardrailList"))
	h := HostSchemas{
		guardrailModel: hostSchema(t, `{"type":"object","properties":{
			"metadata":{"allOf":[{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}],"default":{}},
			"spec":{"type":"object","properties":{"mode":{"type":"string"}}}},
			"x-kubernetes-group-version-kind":[{"group":"policy.example.com","version":"v1","kind":"Guardrail"}]}`),
		guardrailModel + "List": list,
	}
	var asked []string
	ref := func(name string) spec.Ref {
		asked = append(asked, name)
		return spec.MustCreateRef("#/definitions/" + name)
	}
	namer := viewNamer(func(name string) (string, spec.Extensions) { return name, nil }, map[string]string{guardrailModel: "Guardrail", guardrailModel + "List": "GuardrailList"})
	defs := Definitions(h, namer)(ref)

	def, ok := defs[guardrailModel+"List"]
	if !ok {
		t.Fatalf("no definition of %sList", guardrailModel)
	}
	if _, ok := defs[guardrailModel]; !ok {
		t.Fatalf("no definition of %s", guardrailModel)
	}
	for _, dep := range []string{guardrailModel, "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"} {
		found := false
		for _, d := range def.Dependencies {
			found = found || d == dep
		}
		if !found {
			t.Errorf("list dependencies = %v, want %s", def.Dependencies, dep)
		}
	}
	if got := def.Schema.Properties["items"].Items.Schema.Ref.String(); got != "#/definitions/"+guardrailModel {
		t.Errorf("items ref = %q, want it re-pointed through the callback", got)
	}
	for name, d := range map[string]common.OpenAPIDefinition{"list": def, "model": defs[guardrailModel]} {
		raw, err := json.Marshal(d.Schema)
		if err != nil {
			t.Fatalf("json.Marshal(%s): %v", name, err)
		}
		if strings.Contains(string(raw), "#/components/") {
			t.Errorf("%s definition keeps a v3 component reference: %s", name, raw)
		}
		if _, ok := d.Schema.Extensions[gvkExt]; ok {
			t.Errorf("%s definition keeps the host's %s", name, gvkExt)
		}
	}
	v2, ok := def.Schema.Extensions[common.ExtensionV2Schema].(spec.Schema)
	if !ok {
		t.Fatalf("list v2 schema = %T, want a spec.Schema", def.Schema.Extensions[common.ExtensionV2Schema])
	}
	if got := v2.Properties["metadata"]; got.Ref.String() != "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta" || got.AllOf != nil {
		t.Errorf("v2 metadata = %+v, want a plain reference to ListMeta", got)
	}
	wantExt := []any{map[string]any{"group": GroupName, "version": "v1alpha1", "kind": "GuardrailList"}}
	if got := v2.Extensions[gvkExt]; !reflect.DeepEqual(got, wantExt) {
		t.Errorf("v2 %s = %v, want the view's %v", gvkExt, got, wantExt)
	}
	// The host's schema is left as it was.
	if got := list.Properties["items"].Items.Schema.Ref.String(); got != "#/components/schemas/"+guardrailModel {
		t.Errorf("the list schema was changed: items ref %q", got)
	}
	if len(asked) == 0 {
		t.Error("the reference callback was never called")
	}
}
