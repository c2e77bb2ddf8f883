package registry_test

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// TestPreviewOfNamespace: a Preview whose spec.object is a Namespace asks
// what its labels change in its subtree's views. It needs update of that
// namespace, is made in it, and names a namespace's changes only where the
// requester may list the view; the others are counted hidden.
func TestPreviewOfNamespace(t *testing.T) {
	t.Parallel()
	served := func() []kinds.Kind { return kinds.BuiltIns() }
	namespace := func(name string) *runtime.RawExtension {
		return &runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + name + `","labels":{"implicit.dev/parent":"org"}}}`)}
	}
	answer := v1alpha1.PreviewStatus{Name: "team", Operation: v1alpha1.OperationUpdate, Reached: 1, Changed: []v1alpha1.NamespaceChange{
		{Namespace: "team", Name: "org-viewers", Type: v1alpha1.ChangeAdded},
		{Namespace: "team-sub", Name: "org-viewers", Type: v1alpha1.ChangeAdded},
	}}
	const update = "alice update /namespaces /team"
	for _, tc := range []struct {
		name        string
		object      *runtime.RawExtension
		allow       []string
		wantErr     func(error) bool
		wantChanged []string
		wantHidden  int
	}{
		{name: "update of the namespace and list of the views everywhere", object: namespace("team"),
			allow:       []string{update, "alice list implicit.dev/rolebindings /"},
			wantChanged: []string{"team", "team-sub"}},
		{name: "a namespace whose view may not be listed is hidden", object: namespace("team"),
			allow:       []string{update, "alice list implicit.dev/rolebindings team/"},
			wantChanged: []string{"team"}, wantHidden: 1},
		{name: "without update of the namespace", object: namespace("team"),
			allow: []string{"alice list implicit.dev/rolebindings /"}, wantErr: apierrors.IsForbidden},
		{name: "another namespace than the Preview's", object: namespace("org"),
			allow: []string{update, "alice update /namespaces /org"}, wantErr: apierrors.IsBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			allow := map[string]bool{}
			for _, a := range tc.allow {
				allow[a] = true
			}
			st := answer
			src := &fakeQuestions{preview: &st}
			s := registry.NewPreviewStorage(src, &fakeAuthorizer{allow: allow}, served)
			obj, err := s.Create(asUser("alice", "team"), &v1alpha1.Preview{Spec: v1alpha1.PreviewSpec{Resource: "rolebindings", Object: tc.object}}, nil, &metav1.CreateOptions{})
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("err %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if src.previewed == nil || src.previewed.namespace != "team" {
				t.Fatalf("the namespace previewed: %+v", src.previewed)
			}
			p := obj.(*v1alpha1.Preview)
			var got []string
			for _, c := range p.Status.Changed {
				got = append(got, c.Namespace)
			}
			if len(got) != len(tc.wantChanged) || p.Status.Hidden != tc.wantHidden {
				t.Fatalf("changed in %v, hidden %d; want %v, hidden %d", got, p.Status.Hidden, tc.wantChanged, tc.wantHidden)
			}
			for i := range got {
				if got[i] != tc.wantChanged[i] {
					t.Fatalf("changed in %v, want %v", got, tc.wantChanged)
				}
			}
		})
	}
}
