package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/kube-aggregator/pkg/generated/openapi"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// HostSchemas holds the OpenAPI schemas of the source kinds, as the host
// cluster publishes them, keyed by model name (io.k8s.api.rbac.v1.RoleBinding).
// A view has its source's schema, so kubectl explain and clients see the same
// fields under implicit.dev.
type HostSchemas map[string]*spec.Schema

// FetchHostSchemas reads the OpenAPI v3 documents of the group versions gvs
// from the host cluster.
func FetchHostSchemas(ctx context.Context, client discovery.DiscoveryInterface, gvs []schema.GroupVersion) (HostSchemas, error) {
	paths, err := client.OpenAPIV3().Paths()
	if err != nil {
		return nil, fmt.Errorf("listing the host's OpenAPI v3 documents: %w", err)
	}
	out := HostSchemas{}
	for _, gv := range gvs {
		path := "apis/" + gv.String()
		if gv.Group == "" {
			path = "api/" + gv.Version
		}
		doc, ok := paths[path]
		if !ok {
			return nil, fmt.Errorf("the host publishes no OpenAPI v3 document for %s", gv)
		}
		raw, err := doc.Schema("application/json")
		if err != nil {
			return nil, fmt.Errorf("reading the host's OpenAPI v3 document for %s: %w", gv, err)
		}
		var parsed spec3.OpenAPI
		if err := json.Unmarshal(raw, &parsed); err != nil {
			return nil, fmt.Errorf("parsing the host's OpenAPI v3 document for %s: %w", gv, err)
		}
		if parsed.Components == nil {
			continue
		}
		for name, s := range parsed.Components.Schemas {
			out[name] = s
		}
	}
	return out, ctx.Err()
}

var componentRef = regexp.MustCompile(`"\$ref":"#/components/schemas/([^"]+)"`)

// Definitions returns the OpenAPI definitions of the server: the generic API
// machinery types (from k8s.io/kube-aggregator's generated definitions) and
// the host's schemas of the source kinds, with references re-pointed through
// ref and the host's group-version-kind extension removed (the view's own is
// added by the definition namer).
func (h HostSchemas) Definitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs := openapi.GetOpenAPIDefinitions(ref)
	names := make([]string, 0, len(h))
	for n := range h {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := defs[name]; ok {
			continue
		}
		def, err := hostDefinition(h[name], ref)
		if err != nil {
			// A schema that can't round-trip is left out: its view still serves,
			// and explain shows fewer fields. Never expected from a real host.
			continue
		}
		defs[name] = def
	}
	return defs
}

func hostDefinition(s *spec.Schema, ref common.ReferenceCallback) (common.OpenAPIDefinition, error) {
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
	return common.OpenAPIDefinition{Schema: out, Dependencies: deps}, nil
}
