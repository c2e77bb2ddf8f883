package registry_test

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

func TestPreviewStorage(t *testing.T) {
	t.Parallel()
	served := func() []registry.Kind { return kinds.DefaultKinds() }
	rb := func(ns string) *runtime.RawExtension {
		return &runtime.RawExtension{Raw: []byte(`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"ci-bot","namespace":"` + ns + `"},` +
			`"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"}}`)}
	}
	for _, tc := range []struct {
		name    string
		exists  bool
		spec    v1alpha1.PreviewSpec
		allow   string
		wantErr func(error) bool
	}{
		{name: "create needs create", spec: v1alpha1.PreviewSpec{Resource: "rolebindings", Object: rb("team")},
			allow: "alice create rbac.authorization.k8s.io/rolebindings team/"},
		{name: "update needs update of that object", exists: true, spec: v1alpha1.PreviewSpec{Resource: "rolebindings", Object: rb("")},
			allow: "alice update rbac.authorization.k8s.io/rolebindings team/ci-bot"},
		{name: "update without it is forbidden", exists: true, spec: v1alpha1.PreviewSpec{Resource: "rolebindings", Object: rb("")},
			allow: "alice create rbac.authorization.k8s.io/rolebindings team/", wantErr: apierrors.IsForbidden},
		{name: "delete needs delete", exists: true, spec: v1alpha1.PreviewSpec{Resource: "rolebindings", Delete: "ci-bot"},
			allow: "alice delete rbac.authorization.k8s.io/rolebindings team/ci-bot"},
		{name: "deleting what does not exist", spec: v1alpha1.PreviewSpec{Resource: "rolebindings", Delete: "ci-bot"},
			allow: "alice delete rbac.authorization.k8s.io/rolebindings team/ci-bot", wantErr: apierrors.IsNotFound},
		{name: "an object of another namespace", spec: v1alpha1.PreviewSpec{Resource: "rolebindings", Object: rb("org")},
			allow: "alice create rbac.authorization.k8s.io/rolebindings team/", wantErr: apierrors.IsBadRequest},
		{name: "an object of another kind", spec: v1alpha1.PreviewSpec{Resource: "roles", Object: rb("team")},
			allow: "alice create rbac.authorization.k8s.io/roles team/", wantErr: apierrors.IsBadRequest},
		{name: "both an object and a deletion", spec: v1alpha1.PreviewSpec{Resource: "rolebindings", Object: rb("team"), Delete: "ci-bot"},
			wantErr: apierrors.IsBadRequest},
		{name: "a view not served", spec: v1alpha1.PreviewSpec{Resource: "guardrails", Delete: "ci-bot"}, wantErr: apierrors.IsBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := &fakeQuestions{sources: map[string]bool{"rolebindings/team/ci-bot": tc.exists}}
			s := registry.NewPreviewStorage(src, &fakeAuthorizer{allow: map[string]bool{tc.allow: true}}, served)
			obj, err := s.Create(asUser("alice", "team"), &v1alpha1.Preview{Spec: tc.spec}, nil, &metav1.CreateOptions{})
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("err %v", err)
				}
				if src.previewed != nil {
					t.Fatal("previewed despite the error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p := obj.(*v1alpha1.Preview)
			if p.Namespace != "team" || p.Status.Name != "ci-bot" || src.previewed == nil {
				t.Fatalf("got %+v, previewed %+v", p, src.previewed)
			}
			if tc.spec.Object != nil {
				typed, ok := src.previewed.obj.(*rbacv1.RoleBinding)
				if !ok || typed.Namespace != "team" || typed.RoleRef.Name != "view" {
					t.Fatalf("previewed %T %+v, want the typed RoleBinding in team", src.previewed.obj, src.previewed.obj)
				}
			} else if src.previewed.obj != nil {
				t.Fatalf("a deletion previewed %+v", src.previewed.obj)
			}
		})
	}
}

// TestPreviewRefusalHidesExistence: one who may neither create nor update a
// source gets the same refusal whether it exists or not, as kube-apiserver
// authorizes an edit before it reads the object.
func TestPreviewRefusalHidesExistence(t *testing.T) {
	t.Parallel()
	served := func() []registry.Kind { return kinds.DefaultKinds() }
	spec := v1alpha1.PreviewSpec{Resource: "rolebindings", Object: &runtime.RawExtension{Raw: []byte(
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"ci-bot"},` +
			`"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"}}`)}}
	var msgs []string
	for _, exists := range []bool{false, true} {
		src := &fakeQuestions{sources: map[string]bool{"rolebindings/team/ci-bot": exists}}
		s := registry.NewPreviewStorage(src, &fakeAuthorizer{allow: map[string]bool{}}, served)
		_, err := s.Create(asUser("mallory", "team"), &v1alpha1.Preview{Spec: spec}, nil, &metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("exists=%v: err %v, want Forbidden", exists, err)
		}
		msgs = append(msgs, err.Error())
	}
	if msgs[0] != msgs[1] {
		t.Fatalf("the refusal tells whether the source exists:\n  absent: %s\n  present: %s", msgs[0], msgs[1])
	}
}
