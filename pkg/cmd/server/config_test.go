package server_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/cmd/server"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

const header = "apiVersion: config.implicit.dev/v1alpha1\nkind: ImplicitConfiguration\n"

const defaultResources = `resources:
- group: rbac.authorization.k8s.io
  version: v1
  resource: rolebindings
- group: rbac.authorization.k8s.io
  version: v1
  resource: roles
  strategy: Replace
- group: networking.k8s.io
  version: v1
  resource: networkpolicies
`

var (
	guardrails   = schema.GroupVersionResource{Group: "policy.example.com", Version: "v1", Resource: "guardrails"}
	rolesV1beta1 = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1beta1", Resource: "roles"}
	configMaps   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// resource is a configured kind that is not built in: its source and strategy.
type resource struct {
	Source   schema.GroupVersionResource
	Strategy merge.Strategy
}

// builtIn are the configuration's built-in kinds, in order.
func builtIn(cfg server.Configuration) []kinds.Kind { return kinds.Typed(cfg.Kinds) }

// strategies are the strategies set on the built-in kinds, by resource.
func strategies(cfg server.Configuration) map[string]merge.Strategy {
	out := map[string]merge.Strategy{}
	for _, k := range cfg.Kinds {
		if k.Typed() && k.Strategy != "" {
			out[k.Resource()] = k.Strategy
		}
	}
	return out
}

// generic are the kinds that are not built in, in order.
func generic(cfg server.Configuration) []resource {
	var out []resource
	for _, k := range cfg.Kinds {
		if !k.Typed() {
			out = append(out, resource{Source: k.Source, Strategy: k.Strategy})
		}
	}
	return out
}

// globals are the kinds' own global namespaces, by resource.
func globals(cfg server.Configuration) map[string]string {
	out := map[string]string{}
	for _, k := range cfg.Kinds {
		if k.GlobalNamespace != "" {
			out[k.Resource()] = k.GlobalNamespace
		}
	}
	return out
}

// materialized are the sources of the kinds delivered as real objects.
func materialized(cfg server.Configuration) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, k := range cfg.Kinds {
		if k.Materialized() {
			out = append(out, k.Source)
		}
	}
	return out
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadConfiguration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content string
		// wantKinds are the resources of the built-in kinds served, in order.
		wantKinds []string
		// wantStrategies are the strategies of the built-in kinds, by resource.
		wantStrategies map[string]merge.Strategy
		// wantResources are the other kinds served, in order.
		wantResources []resource
		// wantErrs are substrings of the error, one per expected problem.
		wantErrs []string
		// wantCount is the number of aggregated errors, when the error is an aggregate.
		wantCount int
	}{
		{
			name:      "the three default kinds",
			content:   header + defaultResources,
			wantKinds: []string{"rolebindings", "roles", "networkpolicies"},
			wantStrategies: map[string]merge.Strategy{
				"rolebindings": merge.Replace, "roles": merge.Replace, "networkpolicies": merge.Replace,
			},
		},
		{
			name:           "one kind",
			content:        header + "resources:\n- {group: networking.k8s.io, version: v1, resource: networkpolicies}\n",
			wantKinds:      []string{"networkpolicies"},
			wantStrategies: map[string]merge.Strategy{"networkpolicies": merge.Replace},
		},
		{
			name: "a custom resource with Overlay is a generic resource",
			content: header + defaultResources +
				"- {group: policy.example.com, version: v1, resource: guardrails, strategy: Overlay}\n",
			wantKinds: []string{"rolebindings", "roles", "networkpolicies"},
			wantStrategies: map[string]merge.Strategy{
				"rolebindings": merge.Replace, "roles": merge.Replace, "networkpolicies": merge.Replace,
			},
			wantResources: []resource{{Source: guardrails, Strategy: merge.Overlay}},
		},
		{
			name:           "another version of a built-in kind is a generic resource",
			content:        header + "resources:\n- {group: rbac.authorization.k8s.io, version: v1beta1, resource: roles}\n",
			wantStrategies: map[string]merge.Strategy{},
			wantResources:  []resource{{Source: rolesV1beta1, Strategy: merge.Replace}},
		},
		{
			name:           "a core group kind is a generic resource",
			content:        header + "resources:\n- {version: v1, resource: configmaps}\n",
			wantStrategies: map[string]merge.Strategy{},
			wantResources:  []resource{{Source: configMaps, Strategy: merge.Replace}},
		},
		{
			name: "Overlay on a built-in kind is recorded by resource",
			content: header + "resources:\n" +
				"- {group: rbac.authorization.k8s.io, version: v1, resource: roles}\n" +
				"- {group: networking.k8s.io, version: v1, resource: networkpolicies, strategy: Overlay}\n",
			wantKinds:      []string{"roles", "networkpolicies"},
			wantStrategies: map[string]merge.Strategy{"roles": merge.Replace, "networkpolicies": merge.Overlay},
		},
		{
			name:     "unknown top-level field",
			content:  header + "extra: true\n" + defaultResources,
			wantErrs: []string{`unknown field "extra"`},
		},
		{
			// encoding/json's strict decoding names the field but not the entry.
			name:     "unknown resource field",
			content:  header + "resources:\n- {group: rbac.authorization.k8s.io, version: v1, resource: roles, kind: Role}\n",
			wantErrs: []string{`unknown field "kind"`},
		},
		{
			name:     "a key given twice",
			content:  header + "kind: ImplicitConfiguration\n" + defaultResources,
			wantErrs: []string{`"kind" already set`},
		},
		{
			name:      "wrong apiVersion",
			content:   "apiVersion: config.implicit.dev/v1\nkind: ImplicitConfiguration\n" + defaultResources,
			wantErrs:  []string{`apiVersion/kind is "config.implicit.dev/v1"/"ImplicitConfiguration"`},
			wantCount: 1,
		},
		{
			name:      "wrong kind",
			content:   "apiVersion: config.implicit.dev/v1alpha1\nkind: Configuration\n" + defaultResources,
			wantErrs:  []string{`"config.implicit.dev/v1alpha1"/"Configuration"`},
			wantCount: 1,
		},
		{
			name:      "empty resources",
			content:   header + "resources: []\n",
			wantErrs:  []string{"resources: at least one is required"},
			wantCount: 1,
		},
		{
			name:      "no resources",
			content:   header,
			wantErrs:  []string{"resources: at least one is required"},
			wantCount: 1,
		},
		{
			name: "duplicate resource",
			content: header + defaultResources +
				"- {group: rbac.authorization.k8s.io, version: v1, resource: roles}\n",
			wantErrs:  []string{"resources[3] (rbac.authorization.k8s.io/v1, Resource=roles): resource roles is listed twice (resources[1])"},
			wantCount: 1,
		},
		{
			name: "the same resource name in another group is a duplicate",
			content: header + defaultResources +
				"- {group: policy.example.com, version: v1, resource: roles}\n",
			wantErrs:  []string{"resources[3] (policy.example.com/v1, Resource=roles): resource roles is listed twice (resources[1])"},
			wantCount: 1,
		},
		{
			name:      "missing version and resource",
			content:   header + "resources:\n- {group: rbac.authorization.k8s.io}\n",
			wantErrs:  []string{"resources[0] (rbac.authorization.k8s.io/, Resource=): version is required; resource is required"},
			wantCount: 1,
		},
		{
			name:      "bad strategy",
			content:   header + "resources:\n- {group: rbac.authorization.k8s.io, version: v1, resource: roles, strategy: replace}\n",
			wantErrs:  []string{`resources[0] (rbac.authorization.k8s.io/v1, Resource=roles): strategy "replace": want Replace or Overlay`},
			wantCount: 1,
		},
		{
			name:      "aggregateTo: a role that is not a default one, and one twice",
			content:   header + "resources:\n- {group: policy.example.com, version: v1, resource: guardrails, aggregateTo: [view, cluster-admin, view]}\n",
			wantErrs:  []string{`aggregateTo[1] "cluster-admin": want one of view, edit, admin`, `aggregateTo[2] "view": listed twice`},
			wantCount: 1,
		},
		{
			name:      "aggregateTo on a built-in kind",
			content:   header + "resources:\n- {group: rbac.authorization.k8s.io, version: v1, resource: rolebindings, aggregateTo: [view]}\n",
			wantErrs:  []string{"aggregateTo is for configured kinds"},
			wantCount: 1,
		},
		{
			name:           "aggregateTo: the default roles",
			content:        header + "resources:\n- {group: policy.example.com, version: v1, resource: guardrails, aggregateTo: [view, edit, admin]}\n",
			wantStrategies: map[string]merge.Strategy{},
			wantResources:  []resource{{Source: schema.GroupVersionResource{Group: "policy.example.com", Version: "v1", Resource: "guardrails"}, Strategy: merge.Replace}},
		},
		{
			name:      "resource with a dot",
			content:   header + "resources:\n- {group: policy.example.com, version: v1, resource: guardrails.policy.example.com}\n",
			wantErrs:  []string{`resources[0] (policy.example.com/v1, Resource=guardrails.policy.example.com): resource "guardrails.policy.example.com": want a plural resource name`},
			wantCount: 1,
		},
		{
			name:      "resource in upper case",
			content:   header + "resources:\n- {group: policy.example.com, version: v1, resource: GuardRails}\n",
			wantErrs:  []string{`resources[0] (policy.example.com/v1, Resource=GuardRails): resource "GuardRails": want a plural resource name`},
			wantCount: 1,
		},
		{
			name:      "a subresource",
			content:   header + "resources:\n- {version: v1, resource: pods/status}\n",
			wantErrs:  []string{`resources[0] (/v1, Resource=pods/status): resource "pods/status"`},
			wantCount: 1,
		},
		{
			name:      "bad group",
			content:   header + "resources:\n- {group: policy_example.com, version: v1, resource: guardrails}\n",
			wantErrs:  []string{`resources[0] (policy_example.com/v1, Resource=guardrails): group "policy_example.com"`},
			wantCount: 1,
		},
		{
			name:      "the views' own group",
			content:   header + "resources:\n- {group: implicit.dev, version: v1alpha1, resource: rolebindings}\n",
			wantErrs:  []string{"group implicit.dev is implicit-apiserver's own"},
			wantCount: 1,
		},
		{
			name:      "secrets",
			content:   header + "resources:\n- {version: v1, resource: secrets}\n",
			wantErrs:  []string{"secrets can't be served"},
			wantCount: 1,
		},
		{
			name:      "a bad globalNamespace",
			content:   header + "resources:\n- {group: policy.example.com, version: v1, resource: guardrails, globalNamespace: Org_Global}\n",
			wantErrs:  []string{`globalNamespace "Org_Global"`},
			wantCount: 1,
		},
		{
			name:      "bad version",
			content:   header + "resources:\n- {group: policy.example.com, version: V1, resource: guardrails}\n",
			wantErrs:  []string{`resources[0] (policy.example.com/V1, Resource=guardrails): version "V1"`},
			wantCount: 1,
		},
		{
			name: "several problems in one entry are one error",
			content: header + "resources:\n" +
				"- {group: Policy.Example.com, resource: Guardrails, strategy: Merge}\n",
			wantErrs: []string{
				`resources[0] (Policy.Example.com/, Resource=Guardrails): version is required; ` +
					`resource "Guardrails": want a plural resource name such as rolebindings; ` +
					`group "Policy.Example.com": `,
				`; strategy "Merge": want Replace or Overlay`,
			},
			wantCount: 1,
		},
		{
			name: "several problems at once",
			content: "apiVersion: v1\nkind: ImplicitConfiguration\nresources:\n" +
				"- {group: rbac.authorization.k8s.io, version: v1, resource: roles}\n" +
				"- {group: policy.example.com, version: v1, resource: guardrails, strategy: Overlay}\n" +
				"- {group: rbac.authorization.k8s.io, version: v1beta1, resource: roles}\n" +
				"- {group: networking.k8s.io, resource: NetworkPolicies}\n" +
				"- {group: rbac.authorization.k8s.io, version: v1, resource: rolebindings, strategy: Merge}\n" +
				"- {version: v1, resource: configmaps}\n",
			wantErrs: []string{
				`apiVersion/kind is "v1"/"ImplicitConfiguration"`,
				"resources[2] (rbac.authorization.k8s.io/v1beta1, Resource=roles): resource roles is listed twice (resources[0])",
				`resources[3] (networking.k8s.io/, Resource=NetworkPolicies): version is required; resource "NetworkPolicies"`,
				`resources[4] (rbac.authorization.k8s.io/v1, Resource=rolebindings): strategy "Merge": want Replace or Overlay`,
			},
			wantCount: 4,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, tc.content)
			cfg, err := server.LoadConfiguration(path)
			if len(tc.wantErrs) == 0 {
				if err != nil {
					t.Fatalf("LoadConfiguration: %v", err)
				}
				var got []string
				for _, k := range builtIn(cfg) {
					got = append(got, k.Resource())
				}
				if !slices.Equal(got, tc.wantKinds) {
					t.Errorf("kinds = %v, want %v", got, tc.wantKinds)
				}
				if !reflect.DeepEqual(strategies(cfg), tc.wantStrategies) {
					t.Errorf("strategies = %v, want %v", strategies(cfg), tc.wantStrategies)
				}
				if !slices.Equal(generic(cfg), tc.wantResources) {
					t.Errorf("resources = %v, want %v", generic(cfg), tc.wantResources)
				}
				return
			}
			if err == nil {
				t.Fatalf("LoadConfiguration succeeded with %+v, want an error", cfg)
			}
			if cfg.Kinds != nil {
				t.Errorf("configuration = %+v alongside an error, want none", cfg)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file %s", err, path)
			}
			for _, want := range tc.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			if tc.wantCount > 0 {
				var agg utilerrors.Aggregate
				if !errors.As(err, &agg) {
					t.Fatalf("error %q is not an aggregate", err)
				}
				if len(agg.Errors()) != tc.wantCount {
					t.Errorf("%d errors, want %d: %v", len(agg.Errors()), tc.wantCount, agg.Errors())
				}
			}
		})
	}
}

// TestLoadConfigurationKinds checks that a listed built-in kind is the
// registry's own, typed kind, not a copy of its names.
func TestLoadConfigurationKinds(t *testing.T) {
	t.Parallel()
	cfg, err := server.LoadConfiguration(writeConfig(t, header+defaultResources))
	if err != nil {
		t.Fatal(err)
	}
	want := kinds.BuiltIns()
	if len(builtIn(cfg)) != len(want) {
		t.Fatalf("%d kinds, want %d", len(builtIn(cfg)), len(want))
	}
	for i := range want {
		got := builtIn(cfg)[i]
		if got.Source != want[i].Source || got.Kind != want[i].Kind || got.Singular != want[i].Singular || got.Model != want[i].Model {
			t.Errorf("kinds[%d] = %v %s, want %v %s", i, got.Source, got.Kind, want[i].Source, want[i].Kind)
		}
		if got.Unstructured() {
			t.Errorf("kinds[%d] (%s) is served unstructured, want its Go type", i, got.Resource())
		}
		if reflect.TypeOf(got.New()) != reflect.TypeOf(want[i].New()) {
			t.Errorf("kinds[%d].New() = %T, want %T", i, got.New(), want[i].New())
		}
	}
	if len(generic(cfg)) != 0 {
		t.Errorf("resources = %v, want none", generic(cfg))
	}
}

func TestDefaultConfiguration(t *testing.T) {
	t.Parallel()
	cfg := server.DefaultConfiguration()
	var got []schema.GroupVersionResource
	for _, k := range builtIn(cfg) {
		got = append(got, k.Source)
	}
	var want []schema.GroupVersionResource
	for _, k := range kinds.BuiltIns() {
		want = append(want, k.Source)
	}
	if !slices.Equal(got, want) {
		t.Errorf("kinds = %v, want %v", got, want)
	}
	if strategies(cfg) == nil || len(strategies(cfg)) != 0 || len(generic(cfg)) != 0 {
		t.Errorf("strategies = %v, resources = %v: want an empty map and none", strategies(cfg), generic(cfg))
	}
}

func TestLoadConfigurationMissingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "absent.yaml")
	_, err := server.LoadConfiguration(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "--config") {
		t.Errorf("err = %v, want a --config error wrapping os.ErrNotExist", err)
	}
}

func TestCheckResources(t *testing.T) {
	t.Parallel()
	listWatch := []string{"get", "list", "watch"}
	host := []*metav1.APIResourceList{
		{
			GroupVersion: "policy.example.com/v1",
			APIResources: []metav1.APIResource{
				{Name: "guardrails", Kind: "Guardrail", Namespaced: true, Verbs: listWatch},
				{Name: "guardrails/status", Kind: "Guardrail", Namespaced: true, Verbs: []string{"get", "update"}},
				{Name: "clusterguardrails", Kind: "ClusterGuardrail", Namespaced: false, Verbs: listWatch},
				{Name: "snapshots", Kind: "Snapshot", Namespaced: true, Verbs: []string{"get", "list"}},
				{Name: "tokens", Kind: "Token", Namespaced: false, Verbs: []string{"create"}},
			},
		},
		{
			GroupVersion: "v1",
			APIResources: []metav1.APIResource{
				{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: listWatch},
			},
		},
	}
	gvr := func(group, version, resource string) kinds.Kind {
		return kinds.Kind{Source: schema.GroupVersionResource{Group: group, Version: version, Resource: resource}, Strategy: merge.Replace}
	}
	tests := []struct {
		name      string
		resources []kinds.Kind
		// wantErrs are substrings of the error, one per expected problem; none: no error.
		wantErrs []string
		// wantCount is the number of aggregated errors.
		wantCount int
	}{
		{name: "nothing configured"},
		{
			name:      "namespaced kinds that can be listed and watched",
			resources: []kinds.Kind{gvr("policy.example.com", "v1", "guardrails"), gvr("", "v1", "configmaps")},
		},
		{
			name:      "a group version the host does not serve yet is served later",
			resources: []kinds.Kind{gvr("policy.example.com", "v2", "guardrails"), gvr("absent.example.com", "v1", "things")},
		},
		{
			name:      "a kind its group version does not serve yet is served later",
			resources: []kinds.Kind{gvr("policy.example.com", "v1", "widgets")},
		},
		{
			name:      "a cluster-scoped kind",
			resources: []kinds.Kind{gvr("policy.example.com", "v1", "clusterguardrails")},
			wantErrs:  []string{"clusterguardrails.policy.example.com is cluster-scoped"},
			wantCount: 1,
		},
		{
			name:      "a kind without watch",
			resources: []kinds.Kind{gvr("policy.example.com", "v1", "snapshots")},
			wantErrs:  []string{"snapshots.policy.example.com does not support watch"},
			wantCount: 1,
		},
		{
			name:      "a kind with several problems is one error",
			resources: []kinds.Kind{gvr("policy.example.com", "v1", "tokens")},
			wantErrs:  []string{"tokens.policy.example.com is cluster-scoped", "and does not support list and does not support watch"},
			wantCount: 1,
		},
		{
			name: "every bad kind is reported, the good and the absent are not",
			resources: []kinds.Kind{
				gvr("policy.example.com", "v1", "clusterguardrails"),
				gvr("policy.example.com", "v1", "guardrails"),
				gvr("absent.example.com", "v1", "things"),
				gvr("policy.example.com", "v1", "snapshots"),
			},
			wantErrs:  []string{"clusterguardrails.policy.example.com is cluster-scoped", "snapshots.policy.example.com does not support watch"},
			wantCount: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: host}}
			err := server.CheckResources(dc, tc.resources)
			if len(tc.wantErrs) == 0 {
				if err != nil {
					t.Errorf("CheckResources: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("CheckResources succeeded, want an error")
			}
			if !strings.Contains(err.Error(), "--config") {
				t.Errorf("error %q does not name --config", err)
			}
			for _, want := range tc.wantErrs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			var agg utilerrors.Aggregate
			if !errors.As(err, &agg) {
				t.Fatalf("error %q is not an aggregate", err)
			}
			if len(agg.Errors()) != tc.wantCount {
				t.Errorf("%d errors, want %d: %v", len(agg.Errors()), tc.wantCount, agg.Errors())
			}
		})
	}
}

// TestCheckResourcesDiscoveryFailure checks that a discovery failure other
// than NotFound is an error, not a kind to serve later.
func TestCheckResourcesDiscoveryFailure(t *testing.T) {
	t.Parallel()
	dc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	dc.AddReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	err := server.CheckResources(dc, []kinds.Kind{{Source: guardrails}})
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "policy.example.com/v1") {
		t.Errorf("err = %v, want the discovery failure of policy.example.com/v1", err)
	}
}

// TestLoadConfigurationGlobals: a kind's own globalNamespace is recorded by
// resource, for built-in and generic kinds alike; kinds without one use
// --global-namespace.
func TestLoadConfigurationGlobals(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, header+"resources:\n"+
		"- {group: rbac.authorization.k8s.io, version: v1, resource: rolebindings}\n"+
		"- {group: networking.k8s.io, version: v1, resource: networkpolicies, globalNamespace: net-global}\n"+
		"- {group: policy.example.com, version: v1, resource: guardrails, strategy: Overlay, globalNamespace: policy-global}\n")
	cfg, err := server.LoadConfiguration(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"networkpolicies": "net-global", "guardrails": "policy-global"}
	if !reflect.DeepEqual(globals(cfg), want) {
		t.Errorf("Globals = %v, want %v", globals(cfg), want)
	}
}

// TestLoadConfigurationDelivery: delivery is View (the default) or
// Materialize; the materialized kinds are listed, built-in or generic, and
// anything else is an error naming both values.
func TestLoadConfigurationDelivery(t *testing.T) {
	t.Parallel()
	netpol := schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
	tests := []struct {
		name      string
		resources string
		want      []schema.GroupVersionResource
		wantErr   string
	}{{
		name:      "default is View",
		resources: "- {group: networking.k8s.io, version: v1, resource: networkpolicies}\n",
	}, {
		name:      "explicit View",
		resources: "- {group: networking.k8s.io, version: v1, resource: networkpolicies, delivery: View}\n",
	}, {
		name: "built-in and generic kinds materialized",
		resources: "- {group: rbac.authorization.k8s.io, version: v1, resource: rolebindings}\n" +
			"- {group: networking.k8s.io, version: v1, resource: networkpolicies, delivery: Materialize}\n" +
			"- {group: policy.example.com, version: v1, resource: guardrails, delivery: Materialize}\n",
		want: []schema.GroupVersionResource{netpol, guardrails},
	}, {
		name:      "unknown delivery",
		resources: "- {group: networking.k8s.io, version: v1, resource: networkpolicies, delivery: Copy}\n",
		wantErr:   `delivery "Copy": want View`,
	}, {
		name:      "case matters",
		resources: "- {group: networking.k8s.io, version: v1, resource: networkpolicies, delivery: materialize}\n",
		wantErr:   `delivery "materialize"`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := server.LoadConfiguration(writeConfig(t, header+"resources:\n"+tt.resources))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "Materialize") {
					t.Fatalf("err = %v, want one containing %q and naming Materialize", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(materialized(cfg), tt.want) {
				t.Errorf("Materialize = %v, want %v", materialized(cfg), tt.want)
			}
		})
	}
}
