package registry

import (
	"context"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

// RulesLister lists a user's inherited rules in a namespace: *authz.Authorizer,
// the authorization webhook's own computation.
type RulesLister interface {
	RulesFor(user string, groups []string, namespace string) ([]authz.InheritedBinding, error)
}

// RulesReviewStorage serves rulesreviews.implicit.dev, a create-only review
// like SelfSubjectRulesReview: the rules the inherited RoleBindings of the
// namespace grant the requester, each with its binding, scope and resolved
// role, from the authorization webhook's own computation. Creating one is
// authorized by the host like any question resource; reviewing another user
// (spec.user, spec.groups) needs what kube-apiserver's impersonation asks
// (impersonate on the user, or on the ServiceAccount a
// system:serviceaccount: name is, and on each group; SubjectAccessReviews of
// the host), and answers for the identity it would build: only who could
// act as them may read their rules.
type RulesReviewStorage struct {
	review
	src   RulesLister
	authz authorizer.UnconditionalAuthorizer
	// notSynced reports whether an error of src means the views are not
	// read yet (answered 503).
	notSynced func(error) bool
}

var (
	_ rest.Storage              = &RulesReviewStorage{}
	_ rest.Creater              = &RulesReviewStorage{}
	_ rest.Scoper               = &RulesReviewStorage{}
	_ rest.KindProvider         = &RulesReviewStorage{}
	_ rest.SingularNameProvider = &RulesReviewStorage{}
)

// NewRulesReviewStorage returns the storage of rulesreviews; notSynced
// tells the errors of src that mean the views are not read yet.
func NewRulesReviewStorage(src RulesLister, authz authorizer.UnconditionalAuthorizer, notSynced func(error) bool) *RulesReviewStorage {
	return &RulesReviewStorage{review: review{newObject: func() runtime.Object { return &v1alpha1.RulesReview{} }, kind: "RulesReview", singular: "rulesreview"}, src: src, authz: authz, notSynced: notSynced}
}

// Create implements rest.Creater: it answers the review in the status.
func (s *RulesReviewStorage) Create(ctx context.Context, obj runtime.Object, validate rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	in, ok := obj.(*v1alpha1.RulesReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a RulesReview: %T", obj))
	}
	ns, ok := genericapirequest.NamespaceFrom(ctx)
	if !ok || ns == "" {
		return nil, apierrors.NewBadRequest("a namespace is required")
	}
	requester, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewUnauthorized("no user in the request")
	}
	name, groups := requester.GetName(), requester.GetGroups()
	if in.Spec.User == "" && len(in.Spec.Groups) > 0 {
		return nil, apierrors.NewBadRequest("spec.groups needs spec.user")
	}
	if in.Spec.User != "" {
		// Exactly kube-apiserver's impersonation questions, and the
		// identity it would build (impersonation.go).
		id, err := impersonate(ctx, s.authz, &user.DefaultInfo{Name: in.Spec.User, Groups: in.Spec.Groups})
		if err != nil {
			return nil, err
		}
		name, groups = id.Name, id.Groups
	}
	if validate != nil {
		if err := validate(ctx, obj); err != nil {
			return nil, err
		}
	}
	bindings, err := s.src.RulesFor(name, groups, ns)
	if err != nil {
		if s.notSynced != nil && s.notSynced(err) {
			return nil, apierrors.NewServiceUnavailable("implicit-apiserver is starting and has not read its sources yet")
		}
		return nil, err
	}
	out := in.DeepCopy()
	out.Namespace = ns
	// Nothing is stored: no fields are managed.
	out.ManagedFields = nil
	out.Status = v1alpha1.RulesReviewStatus{User: name, Groups: slices.Clone(groups), Rules: inheritedRules(bindings)}
	return out, nil
}

// inheritedRules flattens the bindings into rules, each naming its binding
// and role. A rule without resources (nonResourceURLs only) grants nothing
// through a RoleBinding, and is left out.
func inheritedRules(bindings []authz.InheritedBinding) []v1alpha1.InheritedRule {
	var out []v1alpha1.InheritedRule
	for _, b := range bindings {
		for _, r := range b.Rules {
			if len(r.Resources) == 0 {
				continue
			}
			out = append(out, inheritedRule(b, r))
		}
	}
	return out
}

func inheritedRule(b authz.InheritedBinding, r rbacv1.PolicyRule) v1alpha1.InheritedRule {
	return v1alpha1.InheritedRule{
		Verbs: slices.Clone(r.Verbs), APIGroups: slices.Clone(r.APIGroups),
		Resources: slices.Clone(r.Resources), ResourceNames: slices.Clone(r.ResourceNames),
		Binding:   v1alpha1.ItemReference{Namespace: b.Namespace, Name: b.Name, Scope: b.Scope},
		Candidate: b.Candidate,
		Role:      v1alpha1.RoleReference{Kind: b.Role.Kind, Namespace: b.Role.Namespace, Name: b.Role.Name},
	}
}
