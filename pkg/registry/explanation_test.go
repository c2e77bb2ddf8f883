package registry_test

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

func TestExplanationStorage(t *testing.T) {
	t.Parallel()
	src := &fakeQuestions{served: map[string]bool{"rolebindings": true}}
	authz := &fakeAuthorizer{allow: map[string]bool{"alice get implicit.dev/rolebindings team/ci-bot": true}}
	s := registry.NewExplanationStorage(src, authz)
	explain := func(user, ns, resource, name string) (*v1alpha1.Explanation, error) {
		obj, err := s.Create(asUser(user, ns), &v1alpha1.Explanation{Spec: v1alpha1.ExplanationSpec{Resource: resource, Name: name}}, nil, &metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		return obj.(*v1alpha1.Explanation), nil
	}
	for _, tc := range []struct {
		name, user, namespace, resource, item string
		wantErr                               func(error) bool
	}{
		{name: "allowed: get on the view", user: "alice", namespace: "team", resource: "RoleBindings", item: "ci-bot"},
		{name: "another user", user: "bob", namespace: "team", resource: "rolebindings", item: "ci-bot", wantErr: apierrors.IsForbidden},
		{name: "another namespace", user: "alice", namespace: "org", resource: "rolebindings", item: "ci-bot", wantErr: apierrors.IsForbidden},
		{name: "no name", user: "alice", namespace: "team", resource: "rolebindings", wantErr: apierrors.IsBadRequest},
		{name: "a view that is not served, checked after the access review", user: "alice", namespace: "team", resource: "roles", item: "ci-bot", wantErr: apierrors.IsForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := explain(tc.user, tc.namespace, tc.resource, tc.item)
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("err %v", err)
				}
				return
			}
			if err != nil || e.Namespace != tc.namespace || e.Status.Summary != "rolebindings/ci-bot in team" {
				t.Fatalf("got %+v, %v", e, err)
			}
		})
	}
}
