package servedgroup

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

func guardrailItem(name string) map[string]any {
	return map[string]any{
		"apiVersion": "implicit.dev/v1alpha1",
		"kind":       "Guardrail",
		"metadata":   map[string]any{"name": name, "namespace": "team-a"},
		"spec":       map[string]any{"mode": "enforce", "rules": int64(3)},
	}
}

func TestUnstructuredSerializer(t *testing.T) {
	t.Parallel()
	codecs := NewCodecs(NewScheme(kinds.BuiltIns()))
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	tests := []struct {
		name string
		obj  runtime.Object
		// want is the JSON written, as decoded into a map.
		want map[string]any
	}{
		{
			name: "a list of a kind registered nowhere is written as it is",
			obj: &unstructured.UnstructuredList{
				Object: map[string]any{"apiVersion": "implicit.dev/v1alpha1", "kind": "GuardrailList", "metadata": map[string]any{"resourceVersion": "42"}},
				Items:  []unstructured.Unstructured{{Object: guardrailItem("a")}, {Object: guardrailItem("b")}},
			},
			want: map[string]any{
				"apiVersion": "implicit.dev/v1alpha1", "kind": "GuardrailList", "metadata": map[string]any{"resourceVersion": "42"},
				"items": []any{viaJSON(guardrailItem("a")), viaJSON(guardrailItem("b"))},
			},
		},
		{
			name: "an empty list",
			obj:  &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "implicit.dev/v1alpha1", "kind": "GuardrailList", "metadata": map[string]any{}}},
			want: map[string]any{"apiVersion": "implicit.dev/v1alpha1", "kind": "GuardrailList", "metadata": map[string]any{}, "items": []any{}},
		},
		{
			name: "a single unstructured item",
			obj:  &unstructured.Unstructured{Object: guardrailItem("a")},
			want: viaJSON(guardrailItem("a")),
		},
		{
			name: "a typed view kind goes through the versioning codec",
			obj: &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "admins", Namespace: "team-a"},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "admin"},
			},
			want: map[string]any{
				"apiVersion": "implicit.dev/v1alpha1", "kind": "RoleBinding",
				"metadata": map[string]any{"name": "admins", "namespace": "team-a"},
				"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
			},
		},
		{
			name: "a typed list",
			obj:  &rbacv1.RoleBindingList{Items: []rbacv1.RoleBinding{{ObjectMeta: metav1.ObjectMeta{Name: "admins"}}}},
			want: map[string]any{
				"apiVersion": "implicit.dev/v1alpha1", "kind": "RoleBindingList", "metadata": map[string]any{},
				"items": []any{map[string]any{"metadata": map[string]any{"name": "admins"}, "roleRef": map[string]any{"apiGroup": "", "kind": "", "name": ""}}},
			},
		},
		{
			name: "a status",
			obj:  &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: 404, Message: "gone"},
			want: map[string]any{
				"apiVersion": "v1", "kind": "Status", "metadata": map[string]any{},
				"status": "Failure", "reason": "NotFound", "code": float64(404), "message": "gone",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			enc := unstructuredSerializer{codecs}.EncoderForVersion(info.Serializer, SchemeGroupVersion)
			var buf bytes.Buffer
			if err := enc.Encode(tc.obj, &buf); err != nil {
				t.Fatalf("Encode(%T): %v", tc.obj, err)
			}
			var got map[string]any
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatalf("the output is not JSON: %v\n%s", err, buf.String())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("encoded\n%s\nwant\n%v", buf.String(), tc.want)
			}
		})
	}
}

// TestSchemeCodecRefusesUnregisteredLists is why unstructuredSerializer
// exists: the scheme's own versioning encoder can't write the list of a kind
// that appeared at run time.
func TestSchemeCodecRefusesUnregisteredLists(t *testing.T) {
	t.Parallel()
	codecs := NewCodecs(NewScheme(kinds.BuiltIns()))
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	list := &unstructured.UnstructuredList{
		Object: map[string]any{"apiVersion": "implicit.dev/v1alpha1", "kind": "GuardrailList"},
		Items:  []unstructured.Unstructured{{Object: guardrailItem("a")}},
	}
	var buf bytes.Buffer
	if err := codecs.EncoderForVersion(info.Serializer, SchemeGroupVersion).Encode(list, &buf); err == nil {
		t.Errorf("the scheme's encoder wrote %s: the wrapper may no longer be needed", buf.String())
	}
}

// TestUnstructuredSerializerNegotiates checks that the wrapper keeps the
// scheme's media types and decoders.
func TestUnstructuredSerializerNegotiates(t *testing.T) {
	t.Parallel()
	codecs := NewCodecs(NewScheme(kinds.BuiltIns()))
	s := unstructuredSerializer{codecs}
	if got, want := len(s.SupportedMediaTypes()), len(codecs.SupportedMediaTypes()); got != want {
		t.Errorf("%d media types, want the scheme's %d", got, want)
	}
	info, ok := runtime.SerializerInfoForMediaType(s.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	obj, _, err := s.DecoderToVersion(info.Serializer, SchemeGroupVersion).Decode(
		[]byte(`{"apiVersion":"implicit.dev/v1alpha1","kind":"RoleBinding","metadata":{"name":"admins"}}`), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rb, ok := obj.(*rbacv1.RoleBinding); !ok || rb.Name != "admins" {
		t.Errorf("decoded %#v, want the RoleBinding admins", obj)
	}
}

// viaJSON is v as it reads back from JSON: numbers are float64.
func viaJSON(v map[string]any) map[string]any {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	return out
}
