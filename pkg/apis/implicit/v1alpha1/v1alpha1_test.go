package v1alpha1_test

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestDeepCopy checks that a deep copy shares no slice, map or pointer with
// its original: changing every field of the copy leaves the original as it was.
func TestDeepCopy(t *testing.T) {
	t.Parallel()
	item := &v1alpha1.ItemReference{Namespace: "org", Name: "a"}
	for _, obj := range []runtime.Object{
		&v1alpha1.Hierarchy{Status: v1alpha1.HierarchyStatus{Ancestors: []string{"org"}, Children: []string{"c"},
			Problems: []v1alpha1.HierarchyProblem{{Reason: "Cycle", Cycle: []string{"a", "b"}}}}},
		&v1alpha1.HierarchyList{Items: []v1alpha1.Hierarchy{{Status: v1alpha1.HierarchyStatus{Ancestors: []string{"org"}}}}},
		&v1alpha1.Explanation{Status: v1alpha1.ExplanationStatus{Winner: item, Overlays: []v1alpha1.ItemReference{*item}, Conflicts: []string{"x"},
			Scopes: []v1alpha1.ScopeExplanation{{Item: item, Exclusions: []v1alpha1.ExclusionEffect{{Item: item}}}}}},
		&v1alpha1.Preview{Spec: v1alpha1.PreviewSpec{Object: &runtime.RawExtension{Raw: []byte(`{}`)}},
			Status: v1alpha1.PreviewStatus{Changed: []v1alpha1.NamespaceChange{{Before: &v1alpha1.ItemSummary{Overlays: []string{"o"}}}},
				Unchanged: []v1alpha1.NamespaceUnchanged{{Namespace: "n"}}}},
		&v1alpha1.RulesReview{Spec: v1alpha1.RulesReviewSpec{User: "u", Groups: []string{"g"}},
			Status: v1alpha1.RulesReviewStatus{Groups: []string{"g"}, Rules: []v1alpha1.InheritedRule{{Verbs: []string{"get"}, APIGroups: []string{""},
				Resources: []string{"pods"}, ResourceNames: []string{"p"}, Binding: *item}}}},
		&v1alpha1.CandidateAudit{Status: v1alpha1.CandidateAuditStatus{Candidates: []v1alpha1.CandidateAuditRecord{{
			Since: &metav1.Time{}, Keys: []v1alpha1.AuditKeyCount{{User: "u"}}, Samples: []v1alpha1.AuditSample{{Groups: []string{"g"}}}}}}},
	} {
		c := obj.DeepCopyObject()
		if !reflect.DeepEqual(obj, c) {
			t.Fatalf("%T: copy differs", obj)
		}
		if shared := sharedPointer(reflect.ValueOf(obj), reflect.ValueOf(c)); shared != "" {
			t.Errorf("%T: the copy shares %s", obj, shared)
		}
	}
}

// sharedPointer returns the path of a non-empty slice or pointer that a and b share.
func sharedPointer(a, b reflect.Value) string {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return a.Type().String()
		}
		return sharedPointer(a.Elem(), b.Elem())
	case reflect.Slice:
		if a.Len() == 0 {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return a.Type().String()
		}
		for i := range a.Len() {
			if s := sharedPointer(a.Index(i), b.Index(i)); s != "" {
				return s
			}
		}
	case reflect.Struct:
		for i := range a.NumField() {
			if s := sharedPointer(a.Field(i), b.Field(i)); s != "" {
				return a.Type().Field(i).Name + "." + s
			}
		}
	}
	return ""
}

// TestOpenAPIDefinitions checks that every kind has a definition under its
// model name and that every reference resolves to a definition or to the
// API machinery's ObjectMeta and ListMeta.
func TestOpenAPIDefinitions(t *testing.T) {
	t.Parallel()
	refs := map[string]bool{}
	defs := v1alpha1.GetOpenAPIDefinitions(func(path string) spec.Ref {
		refs[path] = true
		return spec.MustCreateRef("#/definitions/" + path)
	})
	for _, m := range []interface{ OpenAPIModelName() string }{
		v1alpha1.Hierarchy{}, v1alpha1.HierarchyList{}, v1alpha1.Explanation{}, v1alpha1.Preview{}, v1alpha1.RulesReview{},
		v1alpha1.CandidateAudit{},
	} {
		if _, ok := defs[m.OpenAPIModelName()]; !ok {
			t.Errorf("no definition of %s", m.OpenAPIModelName())
		}
	}
	external := map[string]bool{
		"io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": true,
		"io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta":   true,
		"io.k8s.apimachinery.pkg.apis.meta.v1.Time":       true,
	}
	for r := range refs {
		if _, ok := defs[r]; !ok && !external[r] {
			t.Errorf("reference to %s, which has no definition", r)
		}
	}
	for name, def := range defs {
		for _, d := range def.Dependencies {
			if _, ok := defs[d]; !ok && !external[d] {
				t.Errorf("%s depends on %s, which has no definition", name, d)
			}
		}
	}
}
