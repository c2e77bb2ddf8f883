package registry

import (
	"context"
	"errors"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

// question is one impersonation question as kube-apiserver asks it.
type question struct {
	group, version, resource, subresource, namespace, name string
}

func questionOf(a authorizer.Attributes) question {
	return question{a.GetAPIGroup(), a.GetAPIVersion(), a.GetResource(), a.GetSubresource(), a.GetNamespace(), a.GetName()}
}

// recordingAuthorizer allows the questions in allow and records every one
// asked, in order.
type recordingAuthorizer struct {
	allow map[question]bool
	asked []question
}

func (r *recordingAuthorizer) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if a.GetVerb() != "impersonate" || !a.IsResourceRequest() || a.GetUser().GetName() != "root" {
		return authorizer.DecisionDeny, "unexpected question", errors.New("unexpected question")
	}
	q := questionOf(a)
	r.asked = append(r.asked, q)
	if r.allow[q] {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "no rule", nil
}

// TestImpersonation: a review for another user asks exactly what
// kube-apiserver's impersonation asks (k8s.io/apiserver v0.37,
// pkg/endpoints/filters/impersonation, the impersonate verb), in its order,
// and answers for the identity it builds (issue 39, item 4).
func TestImpersonation(t *testing.T) {
	t.Parallel()
	sa := question{"", "v1", "serviceaccounts", "", "ci", "ci-bot"}
	userQ := func(name string) question { return question{"", "v1", "users", "", "", name} }
	groupQ := func(name string) question { return question{"", "v1", "groups", "", "", name} }
	uidQ := func(uid string) question { return question{"authentication.k8s.io", "v1", "uids", "", "", uid} }
	extraQ := func(key, value string) question {
		return question{"authentication.k8s.io", "v1", "userextras", key, "", value}
	}
	allow := func(qs ...question) map[question]bool {
		m := map[question]bool{}
		for _, q := range qs {
			m[q] = true
		}
		return m
	}
	for _, tc := range []struct {
		name      string
		want      user.Info
		allow     map[question]bool
		wantAsked []question
		wantUser  *user.DefaultInfo
	}{
		{
			name:      "a user: users, then system:authenticated added",
			want:      &user.DefaultInfo{Name: "dana"},
			allow:     allow(userQ("dana")),
			wantAsked: []question{userQ("dana")},
			wantUser:  &user.DefaultInfo{Name: "dana", Groups: []string{user.AllAuthenticated}},
		},
		{
			name:      "a ServiceAccount: serviceaccounts NAME in NS, and its fixed groups",
			want:      &user.DefaultInfo{Name: "system:serviceaccount:ci:ci-bot"},
			allow:     allow(sa),
			wantAsked: []question{sa},
			wantUser: &user.DefaultInfo{Name: "system:serviceaccount:ci:ci-bot",
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ci", user.AllAuthenticated}},
		},
		{
			// The hole: a grant on the user name is not a grant on
			// the ServiceAccount.
			name:      "a ServiceAccount is refused with impersonate on users of its name only",
			want:      &user.DefaultInfo{Name: "system:serviceaccount:ci:ci-bot"},
			allow:     allow(userQ("system:serviceaccount:ci:ci-bot")),
			wantAsked: []question{sa},
		},
		{
			// Groups given are the authority, as kube-apiserver takes them:
			// the ServiceAccount's fixed groups are not added.
			name:      "a ServiceAccount with groups: each group asked, only those kept",
			want:      &user.DefaultInfo{Name: "system:serviceaccount:ci:ci-bot", Groups: []string{"builders"}},
			allow:     allow(sa, groupQ("builders")),
			wantAsked: []question{sa, groupQ("builders")},
			wantUser:  &user.DefaultInfo{Name: "system:serviceaccount:ci:ci-bot", Groups: []string{"builders", user.AllAuthenticated}},
		},
		{
			name:      "a malformed ServiceAccount name is a user name",
			want:      &user.DefaultInfo{Name: "system:serviceaccount:ci"},
			allow:     allow(userQ("system:serviceaccount:ci")),
			wantAsked: []question{userQ("system:serviceaccount:ci")},
			wantUser:  &user.DefaultInfo{Name: "system:serviceaccount:ci", Groups: []string{user.AllAuthenticated}},
		},
		{
			name: "uid, groups and extra, in kube-apiserver's order (extra keys sorted)",
			want: &user.DefaultInfo{Name: "dana", UID: "u-1", Groups: []string{"a", "b"},
				Extra: map[string][]string{"scopes": {"x", "y"}, "acme.io/team": {"t"}}},
			allow: allow(userQ("dana"), uidQ("u-1"), groupQ("a"), groupQ("b"),
				extraQ("acme.io/team", "t"), extraQ("scopes", "x"), extraQ("scopes", "y")),
			wantAsked: []question{userQ("dana"), uidQ("u-1"), groupQ("a"), groupQ("b"),
				extraQ("acme.io/team", "t"), extraQ("scopes", "x"), extraQ("scopes", "y")},
			wantUser: &user.DefaultInfo{Name: "dana", UID: "u-1", Groups: []string{"a", "b", user.AllAuthenticated},
				Extra: map[string][]string{"scopes": {"x", "y"}, "acme.io/team": {"t"}}},
		},
		{
			name:      "the first refusal stops the questions",
			want:      &user.DefaultInfo{Name: "dana", Groups: []string{"a", "b"}},
			allow:     allow(userQ("dana"), groupQ("b")),
			wantAsked: []question{userQ("dana"), groupQ("a")},
		},
		{
			name:      "system:authenticated given is not added twice",
			want:      &user.DefaultInfo{Name: "dana", Groups: []string{user.AllAuthenticated}},
			allow:     allow(userQ("dana"), groupQ(user.AllAuthenticated)),
			wantAsked: []question{userQ("dana"), groupQ(user.AllAuthenticated)},
			wantUser:  &user.DefaultInfo{Name: "dana", Groups: []string{user.AllAuthenticated}},
		},
		{
			name:      "system:unauthenticated given: not authenticated",
			want:      &user.DefaultInfo{Name: "dana", Groups: []string{user.AllUnauthenticated}},
			allow:     allow(userQ("dana"), groupQ(user.AllUnauthenticated)),
			wantAsked: []question{userQ("dana"), groupQ(user.AllUnauthenticated)},
			wantUser:  &user.DefaultInfo{Name: "dana", Groups: []string{user.AllUnauthenticated}},
		},
		{
			name:      "anonymous is unauthenticated",
			want:      &user.DefaultInfo{Name: user.Anonymous},
			allow:     allow(userQ(user.Anonymous)),
			wantAsked: []question{userQ(user.Anonymous)},
			wantUser:  &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := &recordingAuthorizer{allow: tc.allow}
			ctx := genericapirequest.WithUser(context.Background(), &user.DefaultInfo{Name: "root", Groups: []string{"ops"}})
			got, err := impersonate(ctx, a, tc.want)
			if !reflect.DeepEqual(a.asked, tc.wantAsked) {
				t.Errorf("asked %+v, want %+v", a.asked, tc.wantAsked)
			}
			if tc.wantUser == nil {
				if !apierrors.IsForbidden(err) {
					t.Fatalf("got %+v, %v; want 403", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.wantUser) {
				t.Errorf("identity %+v, want %+v", got, tc.wantUser)
			}
		})
	}
}
