package kinds

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestBuiltIns(t *testing.T) {
	t.Parallel()
	var got []string
	for _, k := range BuiltIns() {
		got = append(got, k.Source.String())
	}
	want := []string{
		"rbac.authorization.k8s.io/v1, Resource=rolebindings",
		"rbac.authorization.k8s.io/v1, Resource=roles",
		"networking.k8s.io/v1, Resource=networkpolicies",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("BuiltIns() = %q, want %q", got, want)
	}
}

// TestBuiltInsAreTyped: the built-in kinds are served from their Go types
// from the start, with the default strategy and the policy's global
// namespace, and know how to present their items.
func TestBuiltInsAreTyped(t *testing.T) {
	t.Parallel()
	builtIn := BuiltIns()
	for i, k := range builtIn {
		if !k.Typed() || k.Unstructured() || !k.Presented() {
			t.Errorf("BuiltIns()[%d] %v: typed %v, presented %v; want both", i, k.Source, k.Typed(), k.Presented())
		}
		if k.Strategy != "" || k.GlobalNamespace != "" || k.Materialized() {
			t.Errorf("BuiltIns()[%d] = %+v, want the defaults", i, k)
		}
	}
	if typed := Typed(append(builtIn, Kind{Source: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}})); !reflect.DeepEqual(resourcesOf(typed), resourcesOf(builtIn)) {
		t.Errorf("Typed = %v, want %v", resourcesOf(typed), resourcesOf(builtIn))
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

// TestResourcesAndNewObjects: the built-in kinds' view resources, in
// order, and their items' Go types by resource.
func TestResourcesAndNewObjects(t *testing.T) {
	t.Parallel()
	builtIn := BuiltIns()
	if got, want := Resources(builtIn), resourcesOf(builtIn); !reflect.DeepEqual(got, want) {
		t.Errorf("Resources = %v, want %v", got, want)
	}
	objs := NewObjects(builtIn)
	if len(objs) != len(builtIn) {
		t.Errorf("NewObjects has %d resources, want %d", len(objs), len(builtIn))
	}
	for _, k := range builtIn {
		if got, want := reflect.TypeOf(objs[k.Resource()]()), reflect.TypeOf(k.New()); got != want {
			t.Errorf("NewObjects[%s]() is a %v, want %v", k.Resource(), got, want)
		}
	}
}
