package registry

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// Explainer explains view items: *answers.Answers.
type Explainer interface {
	// Serves reports whether resource is a view served now.
	Serves(resource string) bool
	// Explain tells why namespace's view of resource holds name or not.
	Explain(resource, namespace, name string) (v1alpha1.ExplanationStatus, error)
}

// ExplanationStorage serves explanations.implicit.dev, a create-only review
// like SelfSubjectAccessReview: the answer is the created object's status,
// and nothing is stored. Creating one needs get on the view resource in the
// namespace, checked with the requester's user info against the server's
// authorizer (a SubjectAccessReview of the host): an explanation names only
// the scopes of the namespace's lineage, which that view reveals already.
type ExplanationStorage struct {
	review
	src   Explainer
	authz authorizer.UnconditionalAuthorizer
}

var (
	_ rest.Storage              = &ExplanationStorage{}
	_ rest.Creater              = &ExplanationStorage{}
	_ rest.Scoper               = &ExplanationStorage{}
	_ rest.KindProvider         = &ExplanationStorage{}
	_ rest.SingularNameProvider = &ExplanationStorage{}
)

// NewExplanationStorage returns the storage of explanations.
func NewExplanationStorage(src Explainer, authz authorizer.UnconditionalAuthorizer) *ExplanationStorage {
	return &ExplanationStorage{review: review{newObject: func() runtime.Object { return &v1alpha1.Explanation{} }, kind: "Explanation", singular: "explanation"}, src: src, authz: authz}
}

// Create implements rest.Creater: it answers the review in the status.
func (s *ExplanationStorage) Create(ctx context.Context, obj runtime.Object, validate rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	in, ok := obj.(*v1alpha1.Explanation)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not an Explanation: %T", obj))
	}
	ns, ok := genericapirequest.NamespaceFrom(ctx)
	if !ok || ns == "" {
		return nil, apierrors.NewBadRequest("a namespace is required")
	}
	resource, name := strings.ToLower(in.Spec.Resource), in.Spec.Name
	if err := validateNamed(resource, name, "spec"); err != nil {
		return nil, err
	}
	view := v1alpha1.SchemeGroupVersion.WithResource(resource).GroupResource()
	if err := allowed(ctx, s.authz, view, "get", ns, name); err != nil {
		return nil, err
	}
	if !s.src.Serves(resource) {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.resource: implicit.dev serves no view %q", resource))
	}
	if validate != nil {
		if err := validate(ctx, obj); err != nil {
			return nil, err
		}
	}
	st, err := s.src.Explain(resource, ns, name)
	if err != nil {
		return nil, err
	}
	out := in.DeepCopy()
	out.Namespace = ns
	// Nothing is stored: no fields are managed.
	out.ManagedFields = nil
	out.Spec.Resource = resource
	out.Status = st
	return out, nil
}

// validateNamed checks a resource and an object name given in field.
func validateNamed(resource, name, field string) error {
	switch {
	case resource == "":
		return apierrors.NewBadRequest(field + ".resource is required")
	case name == "":
		return apierrors.NewBadRequest(field + ".name is required")
	}
	if msgs := path.IsValidPathSegmentName(name); len(msgs) > 0 {
		return apierrors.NewBadRequest(fmt.Sprintf("%s.name %q: %s", field, name, strings.Join(msgs, ", ")))
	}
	return nil
}

// allowed asks the authorizer whether the request's user may verb the
// resource gr in namespace (name "" for create and list), as a
// SubjectAccessReview of the host would, and returns Forbidden if not.
func allowed(ctx context.Context, authz authorizer.UnconditionalAuthorizer, gr schema.GroupResource, verb, namespace, name string) error {
	user, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return apierrors.NewUnauthorized("no user in the request")
	}
	if authz == nil {
		return apierrors.NewForbidden(gr, name, fmt.Errorf("no authorizer to check %s", verb))
	}
	decision, reason, err := authz.Authorize(ctx, authorizer.AttributesRecord{
		User: user, Verb: verb, Namespace: namespace, APIGroup: gr.Group, Resource: gr.Resource, Name: name,
		ResourceRequest: true,
	})
	if decision == authorizer.DecisionAllow {
		return nil
	}
	msg := fmt.Sprintf("user %q cannot %s %s in the namespace %q", user.GetName(), verb, gr, namespace)
	if reason != "" {
		msg += ": " + reason
	}
	if err != nil {
		msg += fmt.Sprintf(" (%v)", err)
	}
	return apierrors.NewForbidden(gr, name, fmt.Errorf("%s", msg))
}
