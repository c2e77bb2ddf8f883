package kinds

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestDefaultKinds(t *testing.T) {
	t.Parallel()
	var got []string
	for _, k := range DefaultKinds() {
		got = append(got, k.Source.String())
	}
	want := []string{
		"rbac.authorization.k8s.io/v1, Resource=rolebindings",
		"rbac.authorization.k8s.io/v1, Resource=roles",
		"networking.k8s.io/v1, Resource=networkpolicies",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultKinds() = %q, want %q", got, want)
	}
}

// TestDefaults: without a configuration file every built-in kind is served
// from its Go type, with the default strategy and the policy's global
// namespace.
func TestDefaults(t *testing.T) {
	t.Parallel()
	builtIn := DefaultKinds()
	got := Defaults()
	if len(got) != len(builtIn) {
		t.Fatalf("%d kinds, want %d", len(got), len(builtIn))
	}
	for i, k := range got {
		if k.Typed == nil || k.Typed.Source != builtIn[i].Source || k.Source != builtIn[i].Source {
			t.Errorf("Defaults()[%d] = %v typed %v, want the built-in %v", i, k.Source, k.Typed, builtIn[i].Source)
		}
		if k.Strategy != "" || k.GlobalNamespace != "" || k.Materialized() {
			t.Errorf("Defaults()[%d] = %+v, want the defaults", i, k)
		}
	}
	if typed := Typed(got); !reflect.DeepEqual(resourcesOf(typed), resourcesOf(builtIn)) {
		t.Errorf("Typed(Defaults()) = %v, want %v", resourcesOf(typed), resourcesOf(builtIn))
	}
}

func TestBuiltIn(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		source schema.GroupVersionResource
		want   bool
	}{
		{name: "a built-in kind", source: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}, want: true},
		{name: "another version of it", source: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1beta1", Resource: "roles"}},
		{name: "a kind that is not built in", source: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k, ok := BuiltIn(tc.source)
			if ok != tc.want || (ok && k.Source != tc.source) {
				t.Errorf("BuiltIn(%v) = %v, %v; want %v", tc.source, k.Source, ok, tc.want)
			}
		})
	}
}

func resourcesOf[K interface{ Resource() string }](ks []K) []string {
	out := make([]string, 0, len(ks))
	for _, k := range ks {
		out = append(out, k.Resource())
	}
	return out
}
