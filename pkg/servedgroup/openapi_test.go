package servedgroup_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/implicit-dev/implicit-apiserver/pkg/servedgroup"
)

const (
	rbName          = "io.k8s.api.rbac.v1.RoleBinding"
	roleRefName     = "io.k8s.api.rbac.v1.RoleRef"
	subjectName     = "io.k8s.api.rbac.v1.Subject"
	intOrStringName = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
	objectMetaName  = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
	gvkExtension    = "x-kubernetes-group-version-kind"
)

// hostSchemas is a small host document, in the shape a kube-apiserver
// publishes at /openapi/v3: references to components, wrapped in a
// one-element allOf when they carry a default; IntOrString as a oneOf; the
// host's group-version-kind extension on the kind.
var hostSchemas = map[string]string{
	rbName: `{
		"description": "host RoleBinding",
		"type": "object",
		"required": ["roleRef"],
		"properties": {
			"metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}], "default": {}, "description": "Standard object's metadata."},
			"roleRef": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.rbac.v1.RoleRef"}], "default": {}, "description": "The role granted."},
			"subjects": {"type": "array", "items": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.rbac.v1.Subject"}], "default": {}}},
			"port": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
			"labels": {"type": "object", "additionalProperties": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.rbac.v1.Subject"}], "default": {}}}
		},
		"x-kubernetes-group-version-kind": [{"group": "rbac.authorization.k8s.io", "kind": "RoleBinding", "version": "v1"}]
	}`,
	roleRefName: `{
		"description": "host RoleRef",
		"type": "object",
		"properties": {"name": {"type": "string", "default": ""}},
		"x-kubernetes-map-type": "atomic"
	}`,
	subjectName: `{
		"description": "host Subject",
		"type": "object",
		"properties": {"name": {"type": "string", "default": ""}, "nick": {"type": "string", "nullable": true}}
	}`,
	intOrStringName: `{
		"description": "host IntOrString",
		"format": "int-or-string",
		"oneOf": [{"type": "integer"}, {"type": "string"}],
		"x-kubernetes-int-or-string": true
	}`,
	objectMetaName: `{"description": "HOST ObjectMeta", "type": "object"}`,
}

func newHostSchemas(t *testing.T) servedgroup.HostSchemas {
	t.Helper()
	h := servedgroup.HostSchemas{}
	for name, raw := range hostSchemas {
		s := &spec.Schema{}
		if err := json.Unmarshal([]byte(raw), s); err != nil {
			t.Fatalf("schema %s: %v", name, err)
		}
		h[name] = s
	}
	return h
}

// viewGVK is the extension the fake namer gives the RoleBinding view.
func viewGVK() []any {
	return []any{map[string]any{"group": "implicit.dev", "version": "v1alpha1", "kind": "RoleBinding"}}
}

func fakeNamer(name string) (string, spec.Extensions) {
	if name == rbName {
		return name, spec.Extensions{gvkExtension: viewGVK()}
	}
	return name, nil
}

// refRecorder is a common.ReferenceCallback that records the names it is asked for.
type refRecorder struct {
	mu    sync.Mutex
	names map[string]bool
}

func (r *refRecorder) ref(name string) spec.Ref {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names == nil {
		r.names = map[string]bool{}
	}
	r.names[name] = true
	return spec.MustCreateRef("#/definitions/" + name)
}

func (r *refRecorder) asked(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.names[name]
}

func defRef(name string) string { return "#/definitions/" + name }

// v2Of returns the v2 schema embedded in a definition.
func v2Of(t *testing.T, def common.OpenAPIDefinition) spec.Schema {
	t.Helper()
	v, ok := def.Schema.Extensions[common.ExtensionV2Schema]
	if !ok {
		t.Fatalf("no %s extension", common.ExtensionV2Schema)
	}
	v2, ok := v.(spec.Schema)
	if !ok {
		t.Fatalf("%s is a %T, want spec.Schema", common.ExtensionV2Schema, v)
	}
	return v2
}

func TestHostSchemasDefinitions(t *testing.T) {
	t.Parallel()
	rec := &refRecorder{}
	defs := servedgroup.Definitions(newHostSchemas(t), fakeNamer)(rec.ref)

	tests := []struct {
		name  string
		def   string
		check func(t *testing.T, def common.OpenAPIDefinition)
	}{
		{
			name: "references are re-pointed through the callback",
			def:  rbName,
			check: func(t *testing.T, def common.OpenAPIDefinition) {
				p := def.Schema.Properties
				if got := p["roleRef"].AllOf; len(got) != 1 || got[0].Ref.String() != defRef(roleRefName) {
					t.Errorf("roleRef.allOf = %v, want one %s", got, defRef(roleRefName))
				}
				if got := p["subjects"].Items.Schema.AllOf; len(got) != 1 || got[0].Ref.String() != defRef(subjectName) {
					t.Errorf("subjects.items.allOf = %v, want one %s", got, defRef(subjectName))
				}
				if port := p["port"]; port.Ref.String() != defRef(intOrStringName) {
					t.Errorf("port.$ref = %q, want %q", port.Ref.String(), defRef(intOrStringName))
				}
				raw, err := json.Marshal(def.Schema)
				if err != nil {
					t.Fatalf("json.Marshal: %v", err)
				}
				if strings.Contains(string(raw), "#/components/schemas/") {
					t.Errorf("a v3 component reference is left: %s", raw)
				}
				for _, n := range []string{roleRefName, subjectName, intOrStringName, objectMetaName} {
					if !rec.asked(n) {
						t.Errorf("the reference callback was not asked for %s", n)
					}
				}
			},
		},
		{
			name: "dependencies list the referenced names once each",
			def:  rbName,
			check: func(t *testing.T, def common.OpenAPIDefinition) {
				got := slices.Sorted(slices.Values(def.Dependencies))
				want := []string{roleRefName, subjectName, objectMetaName, intOrStringName}
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("Dependencies = %v, want %v", got, want)
				}
			},
		},
		{
			name: "the host's group-version-kind is removed, other content kept",
			def:  rbName,
			check: func(t *testing.T, def common.OpenAPIDefinition) {
				if v, ok := def.Schema.Extensions[gvkExtension]; ok {
					t.Errorf("the v3 schema keeps the host's %s: %v", gvkExtension, v)
				}
				if def.Schema.Description != "host RoleBinding" || !slices.Equal(def.Schema.Required, []string{"roleRef"}) {
					t.Errorf("description/required = %q/%v, want the host's", def.Schema.Description, def.Schema.Required)
				}
			},
		},
		{
			name: "the v2 schema has plain references instead of allOf wrappers",
			def:  rbName,
			check: func(t *testing.T, def common.OpenAPIDefinition) {
				v2 := v2Of(t, def)
				for prop, want := range map[string]string{"metadata": objectMetaName, "roleRef": roleRefName} {
					p := v2.Properties[prop]
					if p.Ref.String() != defRef(want) || p.AllOf != nil || p.Default != nil {
						t.Errorf("v2 %s = $ref %q allOf %v default %v, want a plain $ref %q", prop, p.Ref.String(), p.AllOf, p.Default, defRef(want))
					}
				}
				if p := v2.Properties["roleRef"]; p.Description != "The role granted." {
					t.Errorf("v2 roleRef description = %q, want the host's", p.Description)
				}
				if item := v2.Properties["subjects"].Items.Schema; item.Ref.String() != defRef(subjectName) || item.AllOf != nil {
					t.Errorf("v2 subjects.items = $ref %q allOf %v, want a plain $ref", item.Ref.String(), item.AllOf)
				}
				if ap := v2.Properties["labels"].AdditionalProperties; ap == nil || ap.Schema == nil || ap.Schema.Ref.String() != defRef(subjectName) || ap.Schema.AllOf != nil {
					t.Errorf("v2 labels.additionalProperties = %+v, want a plain $ref", ap)
				}
				// The v3 schema is left as the host wrote it.
				if len(def.Schema.Properties["roleRef"].AllOf) != 1 {
					t.Errorf("the v3 schema lost its allOf: v2 rewriting must not touch it")
				}
			},
		},
		{
			name: "the v2 schema carries the namer's extensions and not the host's",
			def:  rbName,
			check: func(t *testing.T, def common.OpenAPIDefinition) {
				v2 := v2Of(t, def)
				if got := v2.Extensions[gvkExtension]; !reflect.DeepEqual(got, viewGVK()) {
					t.Errorf("v2 %s = %v, want the namer's %v", gvkExtension, got, viewGVK())
				}
				if _, ok := v2.Extensions[common.ExtensionV2Schema]; ok {
					t.Errorf("the v2 schema contains itself")
				}
			},
		},
		{
			name: "the definition marshals, also once the builder adds the namer's extensions",
			def:  rbName,
			check: func(t *testing.T, def common.OpenAPIDefinition) {
				if _, err := json.Marshal(def.Schema); err != nil {
					t.Fatalf("json.Marshal: %v", err)
				}
				// kube-openapi's builders write the namer's extensions into
				// the definition's own map; that must not reach the v2 schema.
				s := def.Schema
				s.Extensions = spec.Extensions{}
				for k, v := range def.Schema.Extensions {
					s.Extensions[k] = v
				}
				s.Extensions[gvkExtension] = viewGVK()
				raw, err := json.Marshal(s)
				if err != nil {
					t.Fatalf("json.Marshal after adding extensions: %v", err)
				}
				var round spec.Schema
				if err := json.Unmarshal(raw, &round); err != nil {
					t.Fatalf("json.Unmarshal: %v", err)
				}
			},
		},
		{
			name: "IntOrString keeps oneOf in v3 and drops it in v2",
			def:  intOrStringName,
			check: func(t *testing.T, def common.OpenAPIDefinition) {
				if len(def.Schema.OneOf) != 2 {
					t.Errorf("v3 oneOf = %v, want the host's two types", def.Schema.OneOf)
				}
				v2 := v2Of(t, def)
				if v2.OneOf != nil || v2.AnyOf != nil {
					t.Errorf("v2 oneOf/anyOf = %v/%v, want none", v2.OneOf, v2.AnyOf)
				}
				if v2.Format != "int-or-string" || v2.Extensions["x-kubernetes-int-or-string"] != true {
					t.Errorf("v2 = format %q extensions %v, want the host's format and extensions", v2.Format, v2.Extensions)
				}
				if _, err := json.Marshal(def.Schema); err != nil {
					t.Errorf("json.Marshal: %v", err)
				}
			},
		},
		{
			name: "nullable is dropped from v2 only",
			def:  subjectName,
			check: func(t *testing.T, def common.OpenAPIDefinition) {
				if !def.Schema.Properties["nick"].Nullable {
					t.Errorf("v3 nick lost nullable")
				}
				if v2Of(t, def).Properties["nick"].Nullable {
					t.Errorf("v2 nick is nullable")
				}
			},
		},
		{
			name: "a schema without a namer extension keeps its own extensions",
			def:  roleRefName,
			check: func(t *testing.T, def common.OpenAPIDefinition) {
				if def.Schema.Extensions["x-kubernetes-map-type"] != "atomic" {
					t.Errorf("v3 extensions = %v, want x-kubernetes-map-type", def.Schema.Extensions)
				}
				v2 := v2Of(t, def)
				if v2.Extensions["x-kubernetes-map-type"] != "atomic" {
					t.Errorf("v2 extensions = %v, want x-kubernetes-map-type", v2.Extensions)
				}
				if _, ok := v2.Extensions[gvkExtension]; ok {
					t.Errorf("v2 has a %s the namer did not give", gvkExtension)
				}
				if len(def.Dependencies) != 0 {
					t.Errorf("Dependencies = %v, want none", def.Dependencies)
				}
				if _, err := json.Marshal(def.Schema); err != nil {
					t.Errorf("json.Marshal: %v", err)
				}
			},
		},
		{
			name: "the generic ObjectMeta is not overridden by the host's",
			def:  objectMetaName,
			check: func(t *testing.T, def common.OpenAPIDefinition) {
				if strings.Contains(def.Schema.Description, "HOST") || len(def.Schema.Properties) == 0 {
					t.Errorf("ObjectMeta = %q with %d properties, want the generated definition", def.Schema.Description, len(def.Schema.Properties))
				}
				if _, ok := def.Schema.Extensions[common.ExtensionV2Schema]; ok {
					t.Errorf("the generated ObjectMeta got a host v2 schema")
				}
			},
		},
		{
			name: "other generic meta definitions are present",
			def:  "io.k8s.apimachinery.pkg.apis.meta.v1.Status",
			check: func(t *testing.T, def common.OpenAPIDefinition) {
				if _, ok := def.Schema.Properties["reason"]; !ok {
					t.Errorf("Status has no reason property: %v", def.Schema)
				}
			},
		},
		{
			name: "generic ListMeta is present",
			def:  "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
			check: func(t *testing.T, def common.OpenAPIDefinition) {
				if _, ok := def.Schema.Properties["resourceVersion"]; !ok {
					t.Errorf("ListMeta has no resourceVersion property")
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			def, ok := defs[tc.def]
			if !ok {
				t.Fatalf("no definition %s", tc.def)
			}
			tc.check(t, def)
		})
	}
}

// TestHostSchemasDefinitionsMarshalAll marshals every definition, as the
// OpenAPI builders do.
func TestHostSchemasDefinitionsMarshalAll(t *testing.T) {
	t.Parallel()
	rec := &refRecorder{}
	defs := servedgroup.Definitions(newHostSchemas(t), fakeNamer)(rec.ref)
	for name, def := range defs {
		if _, err := json.Marshal(def.Schema); err != nil {
			t.Errorf("json.Marshal(%s): %v", name, err)
		}
	}
}

// TestHostSchemasDefinitionsDoNotMutateHost checks that building definitions
// leaves the host schemas as they were, so they can be rendered twice (v2 and v3).
func TestHostSchemasDefinitionsDoNotMutateHost(t *testing.T) {
	t.Parallel()
	h := newHostSchemas(t)
	before, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	rec := &refRecorder{}
	first := servedgroup.Definitions(h, fakeNamer)(rec.ref)
	second := servedgroup.Definitions(h, fakeNamer)(rec.ref)
	after, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Errorf("host schemas changed:\nbefore %s\nafter  %s", before, after)
	}
	a, _ := json.Marshal(first[rbName].Schema)
	b, _ := json.Marshal(second[rbName].Schema)
	if string(a) != string(b) {
		t.Errorf("two renderings differ:\n%s\n%s", a, b)
	}
}
