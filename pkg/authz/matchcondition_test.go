package authz_test

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	authorizationcel "k8s.io/apiserver/pkg/authorization/cel"

	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

// matcher compiles a match condition with kube-apiserver's own compiler for
// AuthorizationConfiguration matchConditions, and evaluates it as the
// webhook authorizer does (k8s.io/apiserver/pkg/authorization/cel).
func matcher(t *testing.T, expression string) *authorizationcel.CELMatcher {
	t.Helper()
	c, err := authorizationcel.NewDefaultCompiler().CompileCELExpression(&authorizationcel.SubjectAccessReviewMatchCondition{Expression: expression})
	if err != nil {
		t.Fatalf("compiling %q: %v", expression, err)
	}
	return &authorizationcel.CELMatcher{CompilationResults: []authorizationcel.CompilationResult{c}}
}

func TestMatchCondition(t *testing.T) {
	t.Parallel()
	excluded := []string{"kube-system", "kube-public", "kube-node-lease"}
	in := func(namespace string) *authorizationv1.SubjectAccessReview {
		return &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "alice", Groups: []string{"viewers"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "get", Version: "v1", Resource: "pods"},
		}}
	}
	nonResource := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "alice", NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/healthz", Verb: "get"},
	}}

	tests := []struct {
		name     string
		global   string
		excluded []string
		review   *authorizationv1.SubjectAccessReview
		want     bool
	}{
		{name: "tenant namespace", global: global, excluded: excluded, review: in("team-a"), want: true},
		{name: "a namespace that merely starts like an excluded one", global: global, excluded: excluded, review: in("kube-systems"), want: true},
		{name: "global namespace", global: global, excluded: excluded, review: in(global), want: false},
		{name: "excluded namespace", global: global, excluded: excluded, review: in("kube-system"), want: false},
		{name: "last excluded namespace", global: global, excluded: excluded, review: in("kube-node-lease"), want: false},
		{name: "cluster-scoped: empty namespace", global: global, excluded: excluded, review: in(""), want: false},
		{name: "no resourceAttributes", global: global, excluded: excluded, review: nonResource, want: false},
		{name: "nothing excluded", global: global, review: in("kube-system"), want: true},
		{name: "nothing excluded, global namespace", global: global, review: in(global), want: false},
		// Namespace names are DNS labels (Options.Validate checks the
		// flags); the quoting still holds for any string.
		{name: "quote in a name", global: "it's", excluded: []string{`back\slash`, `"double"`}, review: in("it's"), want: false},
		{name: "backslash in a name", global: "it's", excluded: []string{`back\slash`, `"double"`}, review: in(`back\slash`), want: false},
		{name: "double quotes in a name", global: "it's", excluded: []string{`back\slash`, `"double"`}, review: in(`"double"`), want: false},
		{name: "quoting keeps other names out", global: "it's", excluded: []string{`back\slash`, `"double"`}, review: in("its"), want: true},
		{name: "an escape sequence stays literal", global: global, excluded: []string{`a\nb`}, review: in("a\nb"), want: true},
		{name: "an escape sequence stays literal, exact", global: global, excluded: []string{`a\nb`}, review: in(`a\nb`), want: false},
		{name: "injection attempt stays a name", global: global, excluded: []string{`x'] || true || ['`}, review: in("team-a"), want: true},
		{name: "injection attempt stays a name, exact", global: global, excluded: []string{`x'] || true || ['`}, review: in(`x'] || true || ['`), want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			expr := authz.MatchCondition(tc.global, tc.excluded)
			got, err := matcher(t, expr).Eval(context.Background(), tc.review)
			if err != nil {
				t.Fatalf("evaluating %q: %v", expr, err)
			}
			if got != tc.want {
				t.Errorf("%q on %+v = %v, want %v", expr, tc.review.Spec.ResourceAttributes, got, tc.want)
			}
		})
	}
}
