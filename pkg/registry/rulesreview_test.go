package registry_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// fakeRules lists fixed bindings for "user|namespace" and records whom it
// was asked about.
type fakeRules struct {
	bindings map[string][]authz.InheritedBinding
	err      error
	user     string
	groups   []string
}

func (f *fakeRules) RulesFor(user string, groups []string, namespace string) ([]authz.InheritedBinding, error) {
	f.user, f.groups = user, groups
	return f.bindings[user+"|"+namespace], f.err
}

// asUserInGroups is a request context of user with groups in namespace.
func asUserInGroups(name string, groups []string, namespace string) context.Context {
	ctx := genericapirequest.WithNamespace(context.Background(), namespace)
	return genericapirequest.WithUser(ctx, &user.DefaultInfo{Name: name, Groups: groups})
}

// TestRulesReviewStorage: a rules review answers the requester's inherited
// rules, each with its binding, scope and role, and another user's only to
// a requester who may impersonate that user and each group named.
func TestRulesReviewStorage(t *testing.T) {
	t.Parallel()
	adminBinding := authz.InheritedBinding{
		Namespace: "org", Name: "platform-admins", Scope: "parent",
		Role: authz.ResolvedRole{Kind: "ClusterRole", Name: "admin"},
		Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"create"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"}},
			{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}},
		},
	}
	src := &fakeRules{bindings: map[string][]authz.InheritedBinding{"dana|team-a": {adminBinding}}}
	authorizer := &fakeAuthorizer{allow: map[string]bool{
		"root impersonate /users /dana":             true,
		"root impersonate /groups /platform:admins": true,
		"half impersonate /users /dana":             true,
		// kube-apiserver asks for the ServiceAccount, not the user name.
		"root impersonate /serviceaccounts ci/ci-bot":             true,
		"sam impersonate /users /system:serviceaccount:ci:ci-bot": true,
	}}
	s := registry.NewRulesReviewStorage(src, authorizer, func(err error) bool { return errors.Is(err, errNotSynced) })
	wantRules := []v1alpha1.InheritedRule{{
		Verbs: []string{"create"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"rolebindings"},
		Binding: v1alpha1.ItemReference{Namespace: "org", Name: "platform-admins", Scope: "parent"},
		Role:    v1alpha1.RoleReference{Kind: "ClusterRole", Name: "admin"},
	}}
	for _, tc := range []struct {
		name       string
		ctx        context.Context
		spec       v1alpha1.RulesReviewSpec
		wantUser   string
		wantGroups []string
		wantRules  []v1alpha1.InheritedRule
		wantErr    func(error) bool
	}{
		{name: "the requester's own rules", ctx: asUserInGroups("dana", []string{"platform:admins"}, "team-a"),
			wantUser: "dana", wantGroups: []string{"platform:admins"}, wantRules: wantRules},
		{name: "none elsewhere", ctx: asUserInGroups("dana", nil, "other"), wantUser: "dana"},
		{name: "another user's, impersonating the user and group", ctx: asUser("root", "team-a"),
			spec:     v1alpha1.RulesReviewSpec{User: "dana", Groups: []string{"platform:admins"}},
			wantUser: "dana", wantGroups: []string{"platform:admins", user.AllAuthenticated}, wantRules: wantRules},
		{name: "a ServiceAccount's, impersonating the ServiceAccount: its groups too", ctx: asUser("root", "team-a"),
			spec:     v1alpha1.RulesReviewSpec{User: "system:serviceaccount:ci:ci-bot"},
			wantUser: "system:serviceaccount:ci:ci-bot", wantGroups: []string{"system:serviceaccounts", "system:serviceaccounts:ci", user.AllAuthenticated}},
		{name: "refused: impersonate on the user name is not on the ServiceAccount", ctx: asUser("sam", "team-a"),
			spec: v1alpha1.RulesReviewSpec{User: "system:serviceaccount:ci:ci-bot"}, wantErr: apierrors.IsForbidden},
		{name: "refused: may not impersonate the user", ctx: asUser("sam", "team-a"),
			spec: v1alpha1.RulesReviewSpec{User: "dana"}, wantErr: apierrors.IsForbidden},
		{name: "refused: may impersonate the user but not the group", ctx: asUser("half", "team-a"),
			spec: v1alpha1.RulesReviewSpec{User: "dana", Groups: []string{"platform:admins"}}, wantErr: apierrors.IsForbidden},
		{name: "groups need a user", ctx: asUser("root", "team-a"),
			spec: v1alpha1.RulesReviewSpec{Groups: []string{"platform:admins"}}, wantErr: apierrors.IsBadRequest},
		{name: "a namespace is required", ctx: asUser("dana", ""), wantErr: apierrors.IsBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src.user, src.groups = "", nil
			obj, err := s.Create(tc.ctx, &v1alpha1.RulesReview{Spec: tc.spec}, nil, &metav1.CreateOptions{})
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("err %v", err)
				}
				if src.user != "" {
					t.Errorf("refused, yet the rules of %q were computed", src.user)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st := obj.(*v1alpha1.RulesReview).Status
			if st.User != tc.wantUser || !reflect.DeepEqual(st.Groups, tc.wantGroups) || !reflect.DeepEqual(st.Rules, tc.wantRules) {
				t.Fatalf("status %+v, want user %q groups %v rules %+v", st, tc.wantUser, tc.wantGroups, tc.wantRules)
			}
			if src.user != tc.wantUser {
				t.Errorf("computed for %q, want %q", src.user, tc.wantUser)
			}
		})
	}

	src.err = errNotSynced
	if _, err := s.Create(asUser("dana", "team-a"), &v1alpha1.RulesReview{}, nil, &metav1.CreateOptions{}); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("before the sources are read: %v, want 503", err)
	}
}

var errNotSynced = errors.New("not synced")
