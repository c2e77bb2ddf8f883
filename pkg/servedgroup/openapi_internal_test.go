package servedgroup

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

func schemaOf(t *testing.T, raw string) spec.Schema {
	t.Helper()
	var s spec.Schema
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatalf("schema %s: %v", raw, err)
	}
	return s
}

func jsonOf(t *testing.T, s spec.Schema) string {
	t.Helper()
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	return string(raw)
}

func TestV2Schema(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
	}{
		{
			name: "a one-element allOf reference becomes a plain reference without its default",
			in:   `{"allOf":[{"$ref":"#/definitions/a.B"}],"default":{},"description":"d"}`,
			want: `{"description":"d","$ref":"#/definitions/a.B"}`,
		},
		{
			name: "a two-element allOf is kept",
			in:   `{"allOf":[{"$ref":"#/definitions/a.B"},{"$ref":"#/definitions/a.C"}]}`,
			want: `{"allOf":[{"$ref":"#/definitions/a.B"},{"$ref":"#/definitions/a.C"}]}`,
		},
		{
			name: "a one-element allOf without a reference is kept",
			in:   `{"allOf":[{"type":"string"}]}`,
			want: `{"allOf":[{"type":"string"}]}`,
		},
		{
			name: "oneOf, anyOf and nullable are dropped",
			in:   `{"format":"int-or-string","oneOf":[{"type":"integer"},{"type":"string"}],"anyOf":[{"type":"integer"}],"nullable":true}`,
			want: `{"format":"int-or-string"}`,
		},
		{
			name: "properties, items and additionalProperties are rewritten",
			in: `{"type":"object","properties":{
				"a":{"allOf":[{"$ref":"#/definitions/a.A"}],"default":{}},
				"list":{"type":"array","items":{"allOf":[{"$ref":"#/definitions/a.I"}],"default":{}}},
				"map":{"type":"object","additionalProperties":{"nullable":true,"allOf":[{"$ref":"#/definitions/a.M"}]}}}}`,
			want: `{"type":"object","properties":{
				"a":{"$ref":"#/definitions/a.A"},
				"list":{"type":"array","items":{"$ref":"#/definitions/a.I"}},
				"map":{"type":"object","additionalProperties":{"$ref":"#/definitions/a.M"}}}}`,
		},
		{
			name: "nested properties are rewritten",
			in:   `{"properties":{"outer":{"properties":{"inner":{"allOf":[{"$ref":"#/definitions/a.X"}],"nullable":true}}}}}`,
			want: `{"properties":{"outer":{"properties":{"inner":{"$ref":"#/definitions/a.X"}}}}}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := schemaOf(t, tc.in)
			before := jsonOf(t, in)
			got := v2Schema(in)
			if g, w := jsonOf(t, got), jsonOf(t, schemaOf(t, tc.want)); g != w {
				t.Errorf("v2Schema =\n%s\nwant\n%s", g, w)
			}
			if after := jsonOf(t, in); after != before {
				t.Errorf("v2Schema changed its input:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestHostDefinitionExtensionsNotShared covers the recursion once found:
// with the v2 schema sharing the main schema's Extensions map, embedding put
// the v2 schema inside itself and marshalling never ended.
func TestHostDefinitionExtensionsNotShared(t *testing.T) {
	t.Parallel()
	ref := func(name string) spec.Ref { return spec.MustCreateRef("#/definitions/" + name) }
	gvk := []any{map[string]any{"group": "implicit.dev", "version": "v1alpha1", "kind": "Role"}}
	tests := []struct {
		name string
		host string
		ext  spec.Extensions
	}{
		{name: "host extensions, namer extensions", host: `{"type":"object","x-kubernetes-map-type":"atomic"}`, ext: spec.Extensions{"x-kubernetes-group-version-kind": gvk}},
		{name: "host extensions, no namer extensions", host: `{"type":"object","x-kubernetes-map-type":"atomic"}`},
		{name: "only the host's group-version-kind", host: `{"type":"object","x-kubernetes-group-version-kind":[{"group":"rbac.authorization.k8s.io","version":"v1","kind":"Role"}]}`, ext: spec.Extensions{"x-kubernetes-group-version-kind": gvk}},
		{name: "no extensions at all", host: `{"type":"object"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			host := schemaOf(t, tc.host)
			def, err := hostDefinition(&host, tc.ext, ref)
			if err != nil {
				t.Fatal(err)
			}
			v2, ok := def.Schema.Extensions[common.ExtensionV2Schema].(spec.Schema)
			if !ok {
				t.Fatalf("no embedded v2 schema: %v", def.Schema.Extensions)
			}
			if reflect.ValueOf(v2.Extensions).UnsafePointer() == reflect.ValueOf(def.Schema.Extensions).UnsafePointer() {
				t.Fatalf("the v2 schema shares the main schema's Extensions map")
			}
			if _, ok := v2.Extensions[common.ExtensionV2Schema]; ok {
				t.Fatalf("the v2 schema contains itself")
			}
			if tc.ext != nil && !reflect.DeepEqual(v2.Extensions["x-kubernetes-group-version-kind"], gvk) {
				t.Errorf("v2 group-version-kind = %v, want the namer's", v2.Extensions["x-kubernetes-group-version-kind"])
			}
			if tc.ext == nil {
				if _, ok := v2.Extensions["x-kubernetes-group-version-kind"]; ok {
					t.Errorf("v2 keeps the host's group-version-kind")
				}
			}
			if _, ok := def.Schema.Extensions["x-kubernetes-group-version-kind"]; ok {
				t.Errorf("the main schema keeps the host's group-version-kind")
			}
			if _, ok := host.Extensions[common.ExtensionV2Schema]; ok {
				t.Errorf("the host schema was written to")
			}
			jsonOf(t, def.Schema)
		})
	}
}
