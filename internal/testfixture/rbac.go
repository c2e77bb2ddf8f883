package testfixture

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// RoleBinding is the test RoleBinding of meta: it binds the ClusterRole view
// to the group "<namespace>:<name>", so that every binding has subjects of
// its own. Each package's tests build meta their own way (uids,
// resourceVersions, options).
func RoleBinding(meta metav1.ObjectMeta) *rbacv1.RoleBinding {
	return GroupBinding(meta, "view", meta.Namespace+":"+meta.Name)
}

// GroupBinding is a RoleBinding of meta that binds the ClusterRole
// clusterRole to group.
func GroupBinding(meta metav1.ObjectMeta, clusterRole, group string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: meta,
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}},
	}
}

// Role is the test Role of meta: it may get pods.
func Role(meta metav1.ObjectMeta) *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: meta,
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}},
	}
}

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
