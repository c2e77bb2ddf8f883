package servedgroup_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi/openapitest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/implicit-dev/implicit-apiserver/pkg/kindcontroller"
	"github.com/implicit-dev/implicit-apiserver/pkg/servedgroup"
)

// openAPIDiscovery is a fake discovery client whose OpenAPI v3 client is
// given (client-go's fake discovery leaves OpenAPIV3 unimplemented).
type openAPIDiscovery struct {
	*fakediscovery.FakeDiscovery
	client openapi.Client
}

func (d openAPIDiscovery) OpenAPIV3() openapi.Client { return d.client }

func newDiscovery(c openapi.Client) openAPIDiscovery {
	return openAPIDiscovery{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}, client: c}
}

var (
	rbacV1 = schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}
	coreV1 = schema.GroupVersion{Version: "v1"}
)

func document(schemas ...string) []byte {
	doc := map[string]any{"openapi": "3.0.0", "info": map[string]any{"title": "Kubernetes", "version": "v1.37.0"}}
	if len(schemas) > 0 {
		s := map[string]any{}
		for _, n := range schemas {
			s[n] = map[string]any{"type": "object", "description": "host " + n}
		}
		doc["components"] = map[string]any{"schemas": s}
	}
	raw, _ := json.Marshal(doc)
	return raw
}

func TestFetchHostSchemas(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		paths map[string]openapi.GroupVersion
		// pathsErr is returned by Paths.
		pathsErr error
		gvs      []schema.GroupVersion
		want     []string
		// wantErr is a substring of the error.
		wantErr string
	}{
		{
			name:  "component schemas of every group version",
			paths: map[string]openapi.GroupVersion{"apis/rbac.authorization.k8s.io/v1": openapitest.FakeGroupVersion{GVSpec: document(rbName, roleRefName)}, "api/v1": openapitest.FakeGroupVersion{GVSpec: document("io.k8s.api.core.v1.Pod")}},
			gvs:   []schema.GroupVersion{rbacV1, coreV1},
			want:  []string{"io.k8s.api.core.v1.Pod", rbName, roleRefName},
		},
		{
			name:  "a document without components adds nothing",
			paths: map[string]openapi.GroupVersion{"apis/rbac.authorization.k8s.io/v1": openapitest.FakeGroupVersion{GVSpec: document()}},
			gvs:   []schema.GroupVersion{rbacV1},
		},
		{
			name:    "missing group version",
			paths:   map[string]openapi.GroupVersion{"api/v1": openapitest.FakeGroupVersion{GVSpec: document()}},
			gvs:     []schema.GroupVersion{rbacV1},
			wantErr: "the host publishes no OpenAPI v3 document for rbac.authorization.k8s.io/v1",
		},
		{
			name:    "the core group is read from api/v1, not apis/v1",
			paths:   map[string]openapi.GroupVersion{"apis/v1": openapitest.FakeGroupVersion{GVSpec: document()}},
			gvs:     []schema.GroupVersion{coreV1},
			wantErr: "no OpenAPI v3 document for v1",
		},
		{
			name:     "listing fails",
			pathsErr: errors.New("connection refused"),
			gvs:      []schema.GroupVersion{rbacV1},
			wantErr:  "listing the host's OpenAPI v3 documents: connection refused",
		},
		{
			name:    "reading a document fails",
			paths:   map[string]openapi.GroupVersion{"apis/rbac.authorization.k8s.io/v1": openapitest.FakeGroupVersion{ForcedErr: errors.New("boom")}},
			gvs:     []schema.GroupVersion{rbacV1},
			wantErr: "reading the host's OpenAPI v3 document for rbac.authorization.k8s.io/v1: boom",
		},
		{
			name:    "a document that does not parse",
			paths:   map[string]openapi.GroupVersion{"apis/rbac.authorization.k8s.io/v1": openapitest.FakeGroupVersion{GVSpec: []byte("{not json")}},
			gvs:     []schema.GroupVersion{rbacV1},
			wantErr: "reading the host's OpenAPI v3 document for rbac.authorization.k8s.io/v1: parsing",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dc := newDiscovery(openapitest.FakeClient{PathsMap: tc.paths, ForcedErr: tc.pathsErr})
			got, err := kindcontroller.FetchHostSchemas(context.Background(), dc, tc.gvs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			names := slices.Sorted(maps.Keys(got))
			if !slices.Equal(names, tc.want) {
				t.Errorf("schemas = %v, want %v", names, tc.want)
			}
			for _, n := range names {
				if got[n].Description != "host "+n {
					t.Errorf("%s description = %q, want the document's", n, got[n].Description)
				}
			}
		})
	}
}

// TestFetchHostSchemasRealDocument reads real kube-apiserver documents
// (client-go's embedded api/v1 and apis/apps/v1) and renders their
// definitions: every one marshals, and no v2 schema keeps a v3-only keyword.
func TestFetchHostSchemasRealDocument(t *testing.T) {
	t.Parallel()
	dc := newDiscovery(openapitest.NewEmbeddedFileClient())
	host, err := kindcontroller.FetchHostSchemas(context.Background(), dc, []schema.GroupVersion{{Group: "apps", Version: "v1"}, coreV1})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"io.k8s.api.apps.v1.Deployment", "io.k8s.api.core.v1.Pod"} {
		if _, ok := host[n]; !ok {
			t.Fatalf("no %s schema among %d", n, len(host))
		}
	}
	rec := &refRecorder{}
	defs := servedgroup.Definitions(host, func(name string) (string, spec.Extensions) { return name, nil })(rec.ref)
	def, ok := defs["io.k8s.api.apps.v1.Deployment"]
	if !ok {
		t.Fatal("no Deployment definition")
	}
	if !slices.Contains(def.Dependencies, "io.k8s.api.apps.v1.DeploymentSpec") {
		t.Errorf("Deployment dependencies = %v, want DeploymentSpec", def.Dependencies)
	}
	if p := v2Of(t, def).Properties["spec"]; p.Ref.String() != defRef("io.k8s.api.apps.v1.DeploymentSpec") || p.AllOf != nil {
		t.Errorf("v2 Deployment spec = $ref %q allOf %v, want a plain reference to DeploymentSpec", p.Ref.String(), p.AllOf)
	}
	for name, d := range defs {
		if _, err := json.Marshal(d.Schema); err != nil {
			t.Errorf("json.Marshal(%s): %v", name, err)
		}
		v2, ok := d.Schema.Extensions[common.ExtensionV2Schema]
		if !ok {
			continue
		}
		raw, err := json.Marshal(v2)
		if err != nil {
			t.Errorf("json.Marshal(%s v2): %v", name, err)
		}
		for _, kw := range []string{`"allOf":`, `"oneOf":`, `"anyOf":`, `"nullable":`, `"#/components/`} {
			if strings.Contains(string(raw), kw) {
				t.Errorf("%s v2 schema contains %s", name, kw)
			}
		}
	}
}

func TestFetchHostSchemasCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dc := newDiscovery(openapitest.FakeClient{PathsMap: map[string]openapi.GroupVersion{"apis/rbac.authorization.k8s.io/v1": openapitest.FakeGroupVersion{GVSpec: document(rbName)}}})
	if _, err := kindcontroller.FetchHostSchemas(ctx, dc, []schema.GroupVersion{rbacV1}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}
