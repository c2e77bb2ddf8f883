package servedgroup

import (
	"encoding/json"
	"maps"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	aggregatoropenapi "k8s.io/kube-aggregator/pkg/generated/openapi"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

var componentRef = regexp.MustCompile(`"\$ref":"#/components/schemas/([^"]+)"`)

// DefinitionNamer names a definition and gives its extensions, as
// k8s.io/apiserver's openapi.DefinitionNamer does.
type DefinitionNamer func(name string) (string, spec.Extensions)

// Definitions returns the OpenAPI definitions of the server: the generic API
// machinery types (from k8s.io/kube-aggregator's generated definitions) and
// the host's schemas h of the source kinds, with references re-pointed
// through ref and the host's group-version-kind extension replaced by the
// view's, from namer.
func Definitions(h HostSchemas, namer DefinitionNamer) common.GetOpenAPIDefinitions {
	return func(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
		return definitions(h, namer, ref)
	}
}

func definitions(h HostSchemas, namer DefinitionNamer, ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs := aggregatoropenapi.GetOpenAPIDefinitions(ref)
	for name, def := range v1alpha1.GetOpenAPIDefinitions(ref) {
		defs[name] = def
	}
	names := make([]string, 0, len(h))
	for n := range h {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := defs[name]; ok {
			continue
		}
		_, ext := namer(name)
		def, err := hostDefinition(h[name], ext, ref)
		if err != nil {
			// A schema that can't round-trip is left out: its view still serves,
			// and explain shows fewer fields. Never expected from a real host.
			klog.ErrorS(err, "Leaving a host schema out of the OpenAPI documents", "model", name)
			continue
		}
		defs[name] = def
	}
	return defs
}

func hostDefinition(s *spec.Schema, ext spec.Extensions, ref common.ReferenceCallback) (common.OpenAPIDefinition, error) {
	c := *s
	if c.Extensions != nil {
		ext := spec.Extensions{}
		for k, v := range c.Extensions {
			if k != "x-kubernetes-group-version-kind" {
				ext[k] = v
			}
		}
		c.Extensions = ext
	}
	raw, err := json.Marshal(&c)
	if err != nil {
		return common.OpenAPIDefinition{}, err
	}
	var deps []string
	seen := map[string]bool{}
	raw = componentRef.ReplaceAllFunc(raw, func(m []byte) []byte {
		name := string(componentRef.FindSubmatch(m)[1])
		if !seen[name] {
			seen[name] = true
			deps = append(deps, name)
		}
		r := ref(name)
		b, _ := json.Marshal(r.String())
		return append([]byte(`"$ref":`), b...)
	})
	var out spec.Schema
	if err := json.Unmarshal(raw, &out); err != nil {
		return common.OpenAPIDefinition{}, err
	}
	// The host's schemas are v3. The v2 document gets its own rendering, as
	// openapi-gen embeds one.
	v2 := v2Schema(out)
	// Embedding writes into the main schema's extensions: they must not be
	// the v2 schema's own map, or the schema would contain itself. The v2
	// builder takes the embedded schema as it is, so it carries the namer's
	// extensions (the view's group-version-kind) itself.
	v2.Extensions = maps.Clone(v2.Extensions)
	for k, v := range ext {
		if v2.Extensions == nil {
			v2.Extensions = spec.Extensions{}
		}
		v2.Extensions[k] = v
	}
	def := common.OpenAPIDefinition{Schema: out, Dependencies: deps}
	return common.EmbedOpenAPIDefinitionIntoV2Extension(def, common.OpenAPIDefinition{Schema: v2, Dependencies: deps}), nil
}

// v2Schema rewrites a v3 schema for OpenAPI v2: a reference wrapped in a
// one-element allOf (v3's way of giving a reference a default or a
// description) becomes a plain reference, and oneOf, anyOf and nullable,
// which v2 lacks, are dropped (IntOrString uses oneOf).
func v2Schema(s spec.Schema) spec.Schema {
	if len(s.AllOf) == 1 && s.AllOf[0].Ref.String() != "" {
		s.Ref = s.AllOf[0].Ref
		s.AllOf = nil
		s.Default = nil
	}
	s.OneOf, s.AnyOf, s.Nullable = nil, nil, false
	if len(s.Properties) > 0 {
		props := make(map[string]spec.Schema, len(s.Properties))
		for k, p := range s.Properties {
			props[k] = v2Schema(p)
		}
		s.Properties = props
	}
	if s.Items != nil && s.Items.Schema != nil {
		item := v2Schema(*s.Items.Schema)
		s.Items = &spec.SchemaOrArray{Schema: &item}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		ap := v2Schema(*s.AdditionalProperties.Schema)
		s.AdditionalProperties = &spec.SchemaOrBool{Allows: true, Schema: &ap}
	}
	return s
}

// ListSchema describes the list of model, the way every Kubernetes list is
// described: custom resources' documents have none.
func ListSchema(model string, gvk schema.GroupVersionKind) *spec.Schema {
	ref := func(name string) spec.Ref { return spec.MustCreateRef("#/components/schemas/" + name) }
	s := &spec.Schema{}
	s.Type = spec.StringOrArray{"object"}
	s.Description = gvk.Kind + " is a list of " + strings.TrimSuffix(gvk.Kind, "List") + "."
	s.Required = []string{"items"}
	s.Properties = map[string]spec.Schema{
		"apiVersion": *spec.StringProperty().WithDescription("APIVersion defines the versioned schema of this representation of an object."),
		"kind":       *spec.StringProperty().WithDescription("Kind is a string value representing the REST resource this object represents."),
		"metadata":   {SchemaProps: spec.SchemaProps{AllOf: []spec.Schema{{SchemaProps: spec.SchemaProps{Ref: ref("io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta")}}}}},
		"items":      *spec.ArrayProperty(&spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(model)}}).WithDescription("The items of the list."),
	}
	s.Extensions = spec.Extensions{"x-kubernetes-group-version-kind": []any{
		map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind},
	}}
	return s
}
