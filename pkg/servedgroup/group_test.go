package servedgroup

import (
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/util"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

func TestCreater(t *testing.T) {
	t.Parallel()
	guardrail := kinds.Kind{Source: guardrails}.WithHostNames(kinds.HostNames{Kind: "Guardrail", Singular: "guardrail", Model: guardrailModel}, SchemeGroupVersion)
	served := append(kinds.BuiltIns(), guardrail)
	c := creater{scheme: NewScheme(kinds.BuiltIns()), kinds: served}
	tests := []struct {
		name string
		gvk  schema.GroupVersionKind
		// wantModel is the OpenAPI model an unstructured sample names.
		wantModel string
		// wantType is the scheme's type, for the others.
		wantType       runtime.Object
		wantRegistered bool
	}{
		{name: "an unstructured kind names its model", gvk: SchemeGroupVersion.WithKind("Guardrail"), wantModel: guardrailModel},
		{name: "and its list names its list model", gvk: SchemeGroupVersion.WithKind("GuardrailList"), wantModel: guardrailModel + "List"},
		{name: "a typed kind is the scheme's", gvk: SchemeGroupVersion.WithKind("RoleBinding"), wantType: &rbacv1.RoleBinding{}},
		{name: "a typed list is the scheme's", gvk: SchemeGroupVersion.WithKind("RoleBindingList"), wantType: &rbacv1.RoleBindingList{}},
		{name: "the source group's kind of the same name is not a view", gvk: policyV1.WithKind("Guardrail"), wantRegistered: true},
		{name: "an unknown kind", gvk: SchemeGroupVersion.WithKind("Quota"), wantRegistered: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := c.New(tc.gvk)
			if tc.wantRegistered {
				if !runtime.IsNotRegisteredError(err) {
					t.Fatalf("New(%v) = %T, %v; want a not-registered error", tc.gvk, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%v): %v", tc.gvk, err)
			}
			if tc.wantModel != "" {
				if _, ok := got.(*modelSample); !ok {
					t.Fatalf("New(%v) = %T, want a model sample", tc.gvk, got)
				}
				if name := util.GetCanonicalTypeName(got); name != tc.wantModel {
					t.Errorf("the sample's OpenAPI model = %q, want %q", name, tc.wantModel)
				}
				return
			}
			if reflect.TypeOf(got) != reflect.TypeOf(tc.wantType) {
				t.Errorf("New(%v) = %T, want %T", tc.gvk, got, tc.wantType)
			}
		})
	}
}
