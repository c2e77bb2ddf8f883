package kindcontroller

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/servedgroup"
)

const (
	guardrailModel = "com.example.policy.v1.Guardrail"
	gvkExt         = "x-kubernetes-group-version-kind"
)

var (
	policyV1   = schema.GroupVersion{Group: "policy.example.com", Version: "v1"}
	guardrails = policyV1.WithResource("guardrails")
)

// guardrailResource is the host's discovery of guardrails; edit modifies a copy.
func guardrailResource(edit func(*metav1.APIResource)) metav1.APIResource {
	r := metav1.APIResource{Name: "guardrails", Kind: "Guardrail", Namespaced: true, Verbs: metav1.Verbs{"get", "list", "watch"}}
	if edit != nil {
		edit(&r)
	}
	return r
}

func TestCheckResource(t *testing.T) {
	t.Parallel()
	others := metav1.APIResource{Name: "policies", Kind: "Policy", Namespaced: true, Verbs: metav1.Verbs{"list", "watch"}}
	tests := []struct {
		name      string
		resources []*metav1.APIResourceList
		// discoveryErr, when set, is what discovery answers.
		discoveryErr error
		want         metav1.APIResource
		wantNotYet   bool
		// wantErr is a substring of the error.
		wantErr string
	}{
		{
			name:      "namespaced with list and watch",
			resources: []*metav1.APIResourceList{{GroupVersion: "policy.example.com/v1", APIResources: []metav1.APIResource{others, guardrailResource(nil)}}},
			want:      guardrailResource(nil),
		},
		{
			name:       "group version not served",
			resources:  []*metav1.APIResourceList{{GroupVersion: "policy.example.com/v2", APIResources: []metav1.APIResource{guardrailResource(nil)}}},
			wantNotYet: true,
			wantErr:    "no such group version yet",
		},
		{
			name:       "resource missing in a served group version",
			resources:  []*metav1.APIResourceList{{GroupVersion: "policy.example.com/v1", APIResources: []metav1.APIResource{others}}},
			wantNotYet: true,
			wantErr:    "does not serve guardrails in policy.example.com/v1 yet",
		},
		{
			name: "cluster-scoped",
			resources: []*metav1.APIResourceList{{GroupVersion: "policy.example.com/v1", APIResources: []metav1.APIResource{
				guardrailResource(func(r *metav1.APIResource) { r.Namespaced = false }),
			}}},
			want:    guardrailResource(func(r *metav1.APIResource) { r.Namespaced = false }),
			wantErr: "guardrails.policy.example.com is cluster-scoped",
		},
		{
			name: "no watch",
			resources: []*metav1.APIResourceList{{GroupVersion: "policy.example.com/v1", APIResources: []metav1.APIResource{
				guardrailResource(func(r *metav1.APIResource) { r.Verbs = metav1.Verbs{"get", "list"} }),
			}}},
			want:    guardrailResource(func(r *metav1.APIResource) { r.Verbs = metav1.Verbs{"get", "list"} }),
			wantErr: "guardrails.policy.example.com does not support watch",
		},
		{
			name: "every problem is named",
			resources: []*metav1.APIResourceList{{GroupVersion: "policy.example.com/v1", APIResources: []metav1.APIResource{
				guardrailResource(func(r *metav1.APIResource) { r.Namespaced, r.Verbs = false, metav1.Verbs{"get"} }),
			}}},
			want:    guardrailResource(func(r *metav1.APIResource) { r.Namespaced, r.Verbs = false, metav1.Verbs{"get"} }),
			wantErr: "is cluster-scoped: only namespaced kinds have views and does not support list and does not support watch",
		},
		{
			name:         "discovery fails",
			discoveryErr: apierrors.NewInternalError(context.DeadlineExceeded),
			wantErr:      "discovery of policy.example.com/v1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := &clienttesting.Fake{Resources: tc.resources}
			if tc.discoveryErr != nil {
				fake.PrependReactor("*", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.discoveryErr
				})
			}
			got, err := CheckResource(&fakediscovery.FakeDiscovery{Fake: fake}, guardrails)
			if IsNotYet(err) != tc.wantNotYet {
				t.Errorf("IsNotYet(%v) = %v, want %v", err, IsNotYet(err), tc.wantNotYet)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
			if tc.discoveryErr != nil && !apierrors.IsInternalError(err) {
				t.Errorf("err = %v, want the discovery error wrapped", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("resource = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// hostSchema parses one schema as a host document holds it.
func hostSchema(t *testing.T, raw string) *spec.Schema {
	t.Helper()
	s := &spec.Schema{}
	if err := json.Unmarshal([]byte(raw), s); err != nil {
		t.Fatalf("schema %s: %v", raw, err)
	}
	return s
}

func TestHostSchemasModelOf(t *testing.T) {
	t.Parallel()
	h := servedgroup.HostSchemas{
		"com.example.policy.v1.Guardrail": hostSchema(t, `{"type":"object","x-kubernetes-group-version-kind":[{"group":"policy.example.com","version":"v1","kind":"Guardrail"}]}`),
		"com.example.policy.v1.Plain":     hostSchema(t, `{"type":"object"}`),
		"com.example.policy.v2.Guardrail": hostSchema(t, `{"type":"object","x-kubernetes-group-version-kind":[{"group":"policy.example.com","version":"v2","kind":"Guardrail"}]}`),
		"com.example.policy.v1.Odd":       hostSchema(t, `{"type":"object","x-kubernetes-group-version-kind":"policy.example.com/v1 Odd"}`),
		"com.example.policy.v1.Options": hostSchema(t, `{"type":"object","x-kubernetes-group-version-kind":[
			{"group":"policy.example.com","version":"v1","kind":"ListOptions"},
			{"group":"policy.example.com","version":"v1","kind":"GetOptions"}]}`),
		// Two models claim Dup: the first by name wins, every time.
		"z.Dup": hostSchema(t, `{"x-kubernetes-group-version-kind":[{"group":"policy.example.com","version":"v1","kind":"Dup"}]}`),
		"m.Dup": hostSchema(t, `{"x-kubernetes-group-version-kind":[{"group":"policy.example.com","version":"v1","kind":"Dup"}]}`),
		"y.Dup": hostSchema(t, `{"x-kubernetes-group-version-kind":[{"group":"policy.example.com","version":"v1","kind":"Dup"}]}`),
		// listSchema's extension is built in Go, not parsed.
		"com.example.policy.v1.GuardrailList": servedgroup.ListSchema(guardrailModel, policyV1.WithKind("GuardrailList")),
	}
	tests := []struct {
		name string
		gvk  schema.GroupVersionKind
		want string
	}{
		{name: "by the group-version-kind extension", gvk: policyV1.WithKind("Guardrail"), want: "com.example.policy.v1.Guardrail"},
		{name: "another version's model is not it", gvk: schema.GroupVersionKind{Group: "policy.example.com", Version: "v2", Kind: "Guardrail"}, want: "com.example.policy.v2.Guardrail"},
		{name: "any entry of the extension", gvk: policyV1.WithKind("GetOptions"), want: "com.example.policy.v1.Options"},
		{name: "a synthesized list", gvk: policyV1.WithKind("GuardrailList"), want: "com.example.policy.v1.GuardrailList"},
		{name: "a model without the extension is never found by its name", gvk: policyV1.WithKind("Plain")},
		{name: "an extension that is not a list is ignored", gvk: policyV1.WithKind("Odd")},
		{name: "another group", gvk: schema.GroupVersionKind{Group: "other.example.com", Version: "v1", Kind: "Guardrail"}},
		{name: "the first by name of several", gvk: policyV1.WithKind("Dup"), want: "m.Dup"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for range 20 {
				if got := ModelOf(h, tc.gvk); got != tc.want {
					t.Fatalf("ModelOf(%v) = %q, want %q", tc.gvk, got, tc.want)
				}
			}
		})
	}
}

func TestListSchema(t *testing.T) {
	t.Parallel()
	s := servedgroup.ListSchema(guardrailModel, policyV1.WithKind("GuardrailList"))
	if !s.Type.Contains("object") {
		t.Errorf("type = %v, want object", s.Type)
	}
	if !reflect.DeepEqual(s.Required, []string{"items"}) {
		t.Errorf("required = %v, want [items]", s.Required)
	}
	if s.Description != "GuardrailList is a list of Guardrail." {
		t.Errorf("description = %q", s.Description)
	}
	wantExt := []any{map[string]any{"group": "policy.example.com", "version": "v1", "kind": "GuardrailList"}}
	if got := s.Extensions[gvkExt]; !reflect.DeepEqual(got, wantExt) {
		t.Errorf("%s = %v, want %v", gvkExt, got, wantExt)
	}
	items, ok := s.Properties["items"]
	if !ok || items.Items == nil || items.Items.Schema == nil {
		t.Fatalf("items = %+v, want an array", items)
	}
	if !items.Type.Contains("array") {
		t.Errorf("items type = %v, want array", items.Type)
	}
	if got, want := items.Items.Schema.Ref.String(), "#/components/schemas/"+guardrailModel; got != want {
		t.Errorf("items ref = %q, want %q", got, want)
	}
	md := s.Properties["metadata"]
	if len(md.AllOf) != 1 || md.AllOf[0].Ref.String() != "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta" {
		t.Errorf("metadata = %+v, want an allOf reference to ListMeta", md)
	}
	for _, p := range []string{"apiVersion", "kind"} {
		if !s.Properties[p].Type.Contains("string") {
			t.Errorf("%s type = %v, want string", p, s.Properties[p].Type)
		}
	}
	// It round-trips as JSON, the way the host's schemas arrive.
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := ModelOf(servedgroup.HostSchemas{"l": hostSchema(t, string(raw))}, policyV1.WithKind("GuardrailList")); got != "l" {
		t.Errorf("modelOf after a JSON round trip = %q, want l", got)
	}
}

// guardrailCRD is the CustomResourceDefinition of guardrails: v1 and v2
// have printer columns, v3 none.
func guardrailCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "guardrails.policy.example.com"},
		"spec": map[string]any{
			"group": "policy.example.com",
			"scope": "Namespaced",
			"names": map[string]any{"plural": "guardrails", "singular": "guardrail", "kind": "Guardrail"},
			"versions": []any{
				map[string]any{"name": "v2", "additionalPrinterColumns": []any{
					map[string]any{"name": "Level", "type": "integer", "jsonPath": ".spec.level"},
				}},
				map[string]any{"name": "v1", "additionalPrinterColumns": []any{
					map[string]any{"name": "Mode", "type": "string", "jsonPath": ".spec.mode", "description": "How it is enforced."},
					map[string]any{"name": "Rules", "type": "integer", "format": "int32", "jsonPath": ".spec.rules", "priority": int64(1)},
					map[string]any{"name": "", "type": "string", "jsonPath": ".spec.unnamed"},
					map[string]any{"name": "NoPath", "type": "string"},
					"not a column",
					map[string]any{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
				}},
				map[string]any{"name": "v3"},
			},
		},
	}}
}

func newCRDClient(objects ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{crdResource: "CustomResourceDefinitionList"}, objects...)
}

func TestPrinterColumns(t *testing.T) {
	t.Parallel()
	failing := func(err error) func() dynamic.Interface {
		return func() dynamic.Interface {
			c := newCRDClient(guardrailCRD())
			c.PrependReactor("get", "customresourcedefinitions", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, err
			})
			return c
		}
	}
	tests := []struct {
		name string
		gvr  schema.GroupVersionResource
		// dyn returns the client; nil means no client at all.
		dyn  func() dynamic.Interface
		want []kinds.PrinterColumn
		// wantErr is a substring of the error.
		wantErr string
	}{
		{
			name: "the version's columns, priority and all; incomplete ones are left out",
			gvr:  guardrails,
			dyn:  func() dynamic.Interface { return newCRDClient(guardrailCRD()) },
			want: []kinds.PrinterColumn{
				{Name: "Mode", Type: "string", JSONPath: ".spec.mode", Description: "How it is enforced."},
				{Name: "Rules", Type: "integer", Format: "int32", JSONPath: ".spec.rules", Priority: 1},
				{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
			},
		},
		{
			name: "another version has its own",
			gvr:  schema.GroupVersionResource{Group: "policy.example.com", Version: "v2", Resource: "guardrails"},
			dyn:  func() dynamic.Interface { return newCRDClient(guardrailCRD()) },
			want: []kinds.PrinterColumn{{Name: "Level", Type: "integer", JSONPath: ".spec.level"}},
		},
		{
			name: "a version without columns",
			gvr:  schema.GroupVersionResource{Group: "policy.example.com", Version: "v3", Resource: "guardrails"},
			dyn:  func() dynamic.Interface { return newCRDClient(guardrailCRD()) },
		},
		{
			name: "a version the CRD does not have",
			gvr:  schema.GroupVersionResource{Group: "policy.example.com", Version: "v9", Resource: "guardrails"},
			dyn:  func() dynamic.Interface { return newCRDClient(guardrailCRD()) },
		},
		{
			name: "no CRD: a built-in or aggregated kind",
			gvr:  guardrails,
			dyn:  func() dynamic.Interface { return newCRDClient() },
		},
		{
			name: "another resource's CRD is not read",
			gvr:  policyV1.WithResource("policies"),
			dyn:  func() dynamic.Interface { return newCRDClient(guardrailCRD()) },
		},
		{
			name: "CRDs we may not read",
			gvr:  guardrails,
			dyn:  failing(apierrors.NewForbidden(crdResource.GroupResource(), "guardrails.policy.example.com", nil)),
		},
		{
			name: "no client",
			gvr:  guardrails,
		},
		{
			name:    "reading the CRD fails",
			gvr:     guardrails,
			dyn:     failing(apierrors.NewServiceUnavailable("etcd is away")),
			wantErr: "reading the CustomResourceDefinition of guardrails.policy.example.com: etcd is away",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var dyn dynamic.Interface
			if tc.dyn != nil {
				dyn = tc.dyn()
			}
			got, _, err := printerColumns(context.Background(), dyn, tc.gvr)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				if !apierrors.IsServiceUnavailable(err) {
					t.Errorf("err = %v, want the client's error wrapped", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("columns = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	source := func() kinds.HostNames {
		return kinds.HostNames{
			Kind: "Guardrail", Singular: "guardrail", Model: guardrailModel,
			Columns: []kinds.PrinterColumn{{Name: "Mode", Type: "string", JSONPath: ".spec.mode"}},
		}
	}
	models := func() servedgroup.HostSchemas {
		return servedgroup.HostSchemas{
			guardrailModel:          hostSchema(t, `{"type":"object","properties":{"spec":{"type":"object","properties":{"mode":{"type":"string"},"rules":{"type":"integer"}}}}}`),
			guardrailModel + "List": servedgroup.ListSchema(guardrailModel, policyV1.WithKind("GuardrailList")),
		}
	}
	base, err := fingerprint(guardrails, source(), models())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		src      func(*kinds.HostNames)
		models   func(servedgroup.HostSchemas)
		wantSame bool
	}{
		{name: "nothing changed", wantSame: true},
		{
			name: "the same schemas, built in another order",
			models: func(h servedgroup.HostSchemas) {
				// Properties in another order of insertion: the same JSON.
				h[guardrailModel] = hostSchema(t, `{"properties":{"spec":{"properties":{"rules":{"type":"integer"},"mode":{"type":"string"}},"type":"object"}},"type":"object"}`)
			},
			wantSame: true,
		},
		{name: "a schema's field changes", models: func(h servedgroup.HostSchemas) {
			h[guardrailModel].Properties["spec"].Properties["mode"] = *spec.Int64Property()
		}},
		{name: "a schema's description changes", models: func(h servedgroup.HostSchemas) { h[guardrailModel].Description = "new" }},
		{name: "a model is added", models: func(h servedgroup.HostSchemas) { h["com.example.policy.v1.Rule"] = hostSchema(t, `{"type":"object"}`) }},
		{name: "a model is removed", models: func(h servedgroup.HostSchemas) { delete(h, guardrailModel+"List") }},
		{name: "a model is renamed", models: func(h servedgroup.HostSchemas) { h["x"] = h[guardrailModel]; delete(h, guardrailModel) }},
		{name: "a column is added", src: func(s *kinds.HostNames) {
			s.Columns = append(s.Columns, kinds.PrinterColumn{Name: "Rules", Type: "integer", JSONPath: ".spec.rules"})
		}},
		{name: "a column's priority changes", src: func(s *kinds.HostNames) { s.Columns[0].Priority = 1 }},
		{name: "a column's path changes", src: func(s *kinds.HostNames) { s.Columns[0].JSONPath = ".spec.level" }},
		{name: "the columns go", src: func(s *kinds.HostNames) { s.Columns = nil }},
		{name: "the singular changes", src: func(s *kinds.HostNames) { s.Singular = "rail" }},
		{name: "the model changes", src: func(s *kinds.HostNames) { s.Model = "x" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src, h := source(), models()
			if tc.src != nil {
				tc.src(&src)
			}
			if tc.models != nil {
				tc.models(h)
			}
			for range 5 {
				got, err := fingerprint(guardrails, src, h)
				if err != nil {
					t.Fatal(err)
				}
				if (got == base) != tc.wantSame {
					t.Fatalf("fingerprint = %s, base %s: same = %v, want %v", got, base, got == base, tc.wantSame)
				}
			}
		})
	}
}

// fakeHost is a kube-apiserver serving policy.example.com/v1 discovery and
// OpenAPI v3, enough for a real discovery client.
type fakeHost struct {
	// resources is the group version's discovery; nil is a 404.
	resources *metav1.APIResourceList
	// indexed says /openapi/v3 lists the group version's document.
	indexed bool
	// doc is the group version's OpenAPI v3 document.
	doc []byte
}

func (h fakeHost) start(t *testing.T) discovery.DiscoveryInterface {
	t.Helper()
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(v); err != nil {
			t.Errorf("writing a response: %v", err)
		}
	}
	mux.HandleFunc("/apis/policy.example.com/v1", func(w http.ResponseWriter, r *http.Request) {
		if h.resources == nil {
			http.NotFound(w, r)
			return
		}
		writeJSON(w, h.resources)
	})
	// The whole discovery, read for the short names other resources have.
	mux.HandleFunc("/api", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, metav1.APIVersions{})
	})
	mux.HandleFunc("/apis", func(w http.ResponseWriter, _ *http.Request) {
		groups := metav1.APIGroupList{}
		if h.resources != nil {
			gv := metav1.GroupVersionForDiscovery{GroupVersion: "policy.example.com/v1", Version: "v1"}
			groups.Groups = append(groups.Groups, metav1.APIGroup{Name: "policy.example.com", Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv})
		}
		writeJSON(w, groups)
	})
	mux.HandleFunc("/openapi/v3", func(w http.ResponseWriter, _ *http.Request) {
		paths := map[string]any{"api/v1": map[string]any{"serverRelativeURL": "/openapi/v3/api/v1?hash=C"}}
		if h.indexed {
			paths["apis/policy.example.com/v1"] = map[string]any{"serverRelativeURL": "/openapi/v3/apis/policy.example.com/v1?hash=X"}
		}
		writeJSON(w, map[string]any{"paths": paths})
	})
	mux.HandleFunc("/openapi/v3/apis/policy.example.com/v1", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("hash") != "X" {
			t.Errorf("document read without its hash: %s", r.URL)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(h.doc)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("unexpected request %s %s", r.Method, r.URL)
		http.NotFound(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: srv.URL})
}

// guardrailDocument is the host's OpenAPI v3 document of policy.example.com/v1
// with the named schemas of models.
func guardrailDocument(t *testing.T, models map[string]string) []byte {
	t.Helper()
	schemas := map[string]json.RawMessage{}
	for n, s := range models {
		schemas[n] = json.RawMessage(s)
	}
	raw, err := json.Marshal(map[string]any{
		"openapi":    "3.0.0",
		"info":       map[string]any{"title": "Kubernetes", "version": "v1.37.0"},
		"components": map[string]any{"schemas": schemas},
	})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

const guardrailSchema = `{"type":"object","properties":{
	"metadata":{"allOf":[{"$ref":"#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}],"default":{}},
	"spec":{"type":"object","properties":{"mode":{"type":"string"}}}},
	"x-kubernetes-group-version-kind":[{"group":"policy.example.com","version":"v1","kind":"Guardrail"}]}`

// TestResolve reads a kind from a host over HTTP with client-go's own
// discovery client. Not parallel with other tests: it checks that no
// goroutine outlives it.
func TestResolve(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })

	served := &metav1.APIResourceList{GroupVersion: "policy.example.com/v1", APIResources: []metav1.APIResource{guardrailResource(nil)}}
	withModel := map[string]string{guardrailModel: guardrailSchema, "com.example.policy.v1.Other": `{"type":"object"}`}
	v1Columns := []kinds.PrinterColumn{
		{Name: "Mode", Type: "string", JSONPath: ".spec.mode", Description: "How it is enforced."},
		{Name: "Rules", Type: "integer", Format: "int32", JSONPath: ".spec.rules", Priority: 1},
		{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	}
	tests := []struct {
		name   string
		host   fakeHost
		dyn    func() dynamic.Interface
		want   kinds.HostNames
		models []string
		// wantList is the description of the list model, when it is the host's.
		wantList   string
		wantNotYet bool
		// wantErr is a substring of the error.
		wantErr string
	}{
		{
			name:   "a custom resource: names, schema, a synthesized list and printer columns",
			host:   fakeHost{resources: served, indexed: true, doc: guardrailDocument(t, withModel)},
			dyn:    func() dynamic.Interface { return newCRDClient(guardrailCRD()) },
			want:   kinds.HostNames{Kind: "Guardrail", Singular: "guardrail", Model: guardrailModel, Columns: v1Columns},
			models: []string{guardrailModel, guardrailModel + "List", "com.example.policy.v1.Other"},
		},
		{
			name: "the singular name is discovery's, lower-cased",
			host: fakeHost{resources: &metav1.APIResourceList{GroupVersion: "policy.example.com/v1", APIResources: []metav1.APIResource{
				guardrailResource(func(r *metav1.APIResource) { r.SingularName = "GuardRail" }),
			}}, indexed: true, doc: guardrailDocument(t, withModel)},
			want:   kinds.HostNames{Kind: "Guardrail", Singular: "guardrail", Model: guardrailModel},
			models: []string{guardrailModel, guardrailModel + "List", "com.example.policy.v1.Other"},
		},
		{
			name: "the host's own list model is kept",
			host: fakeHost{resources: served, indexed: true, doc: guardrailDocument(t, map[string]string{
				guardrailModel:          guardrailSchema,
				guardrailModel + "List": `{"type":"object","description":"host list"}`,
			})},
			want:     kinds.HostNames{Kind: "Guardrail", Singular: "guardrail", Model: guardrailModel},
			models:   []string{guardrailModel, guardrailModel + "List"},
			wantList: "host list",
		},
		{
			name:       "the document has no schema of the kind",
			host:       fakeHost{resources: served, indexed: true, doc: guardrailDocument(t, map[string]string{"com.example.policy.v1.Other": `{"type":"object"}`})},
			wantNotYet: true,
			wantErr:    "has no schema of kind Guardrail yet",
		},
		{
			name:       "no document of the group version",
			host:       fakeHost{resources: served},
			wantNotYet: true,
			wantErr:    "publishes no OpenAPI schema of policy.example.com/v1 yet",
		},
		{
			name:       "the group version is not served",
			host:       fakeHost{indexed: true, doc: guardrailDocument(t, withModel)},
			wantNotYet: true,
			wantErr:    "no such group version yet",
		},
		{
			name: "a cluster-scoped kind",
			host: fakeHost{resources: &metav1.APIResourceList{GroupVersion: "policy.example.com/v1", APIResources: []metav1.APIResource{
				guardrailResource(func(r *metav1.APIResource) { r.Namespaced = false }),
			}}, indexed: true, doc: guardrailDocument(t, withModel)},
			wantErr: "cluster-scoped",
		},
		{
			name: "the CRD can't be read",
			host: fakeHost{resources: served, indexed: true, doc: guardrailDocument(t, withModel)},
			dyn: func() dynamic.Interface {
				c := newCRDClient(guardrailCRD())
				c.PrependReactor("get", "customresourcedefinitions", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewServiceUnavailable("etcd is away")
				})
				return c
			},
			wantErr: "reading the CustomResourceDefinition",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dc := tc.host.start(t)
			var dyn dynamic.Interface
			if tc.dyn != nil {
				dyn = tc.dyn()
			}
			got, err := resolve(context.Background(), dc, dyn, &schemaCache{}, guardrails)
			if IsNotYet(err) != tc.wantNotYet {
				t.Errorf("IsNotYet(%v) = %v, want %v", err, IsNotYet(err), tc.wantNotYet)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.names, tc.want) {
				t.Errorf("names = %+v, want %+v", got.names, tc.want)
			}
			for _, m := range tc.models {
				if _, ok := got.models[m]; !ok {
					t.Errorf("no model %s among %d", m, len(got.models))
				}
			}
			if len(got.models) != len(tc.models) {
				t.Errorf("%d models, want %d", len(got.models), len(tc.models))
			}
			list := got.models[tc.want.Model+"List"]
			if tc.wantList != "" {
				if list.Description != tc.wantList {
					t.Errorf("list description = %q, want the host's %q", list.Description, tc.wantList)
				}
			} else if got := ModelOf(servedgroup.HostSchemas{"l": list}, policyV1.WithKind("GuardrailList")); got != "l" {
				t.Errorf("the synthesized list is not of policy.example.com/v1 GuardrailList: %v", list.Extensions)
			}
			want, err := fingerprint(guardrails, got.names, got.models)
			if err != nil {
				t.Fatal(err)
			}
			if got.fingerprint == "" || got.fingerprint != want {
				t.Errorf("fingerprint = %q, want %q", got.fingerprint, want)
			}
		})
	}
}
