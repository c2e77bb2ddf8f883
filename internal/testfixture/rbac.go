package testfixture

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// RoleBindingOverlayer overlays RoleBindings with the real rbac/v1 schema,
// where subjects and roleRef are atomic (see BuiltinOverlayer).
func RoleBindingOverlayer(t testing.TB) merge.Overlayer {
	t.Helper()
	return BuiltinOverlayer(t, "rbac.authorization.k8s.io/v1", "RoleBinding")
}

// BuiltinOverlayer overlays a built-in kind with its real schema: the
// structured-merge-diff schema client-go generates from Kubernetes' OpenAPI
// (k8s.io/client-go/applyconfigurations), as kube-apiserver's server-side
// apply has it.
func BuiltinOverlayer(t testing.TB, apiVersion, kind string) merge.Overlayer {
	t.Helper()
	tv, err := applyconfigurations.NewTypeConverter(scheme.Scheme).ObjectToTyped(&unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": apiVersion, "kind": kind,
	}})
	if err != nil {
		t.Fatalf("%s schema: %v", kind, err)
	}
	if n := tv.TypeRef().NamedType; n == nil || !strings.HasSuffix(*n, "."+kind) {
		t.Fatalf("%s type = %+v", kind, tv.TypeRef())
	}
	o, err := merge.NewOverlayerForType(typed.ParseableType{Schema: tv.Schema(), TypeRef: tv.TypeRef()})
	if err != nil {
		t.Fatalf("NewOverlayerForType: %v", err)
	}
	return o
}
