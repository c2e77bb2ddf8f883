package registry

import (
	"context"
	"fmt"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// ParamViews reads the parameters admission policies take from the views:
// *answers.Answers.
type ParamViews interface {
	// NamespaceLabels returns namespace's labels, and false if it does not
	// exist.
	NamespaceLabels(namespace string) (map[string]string, bool, error)
	// Params returns the items of namespace's view of resource that a
	// paramRef resolves to: item name when set, else those sel matches.
	Params(resource, namespace, name string, sel labels.Selector) ([]v1alpha1.PolicyParam, error)
}

// AdmissionPolicies reads the host's admission policies and their bindings.
type AdmissionPolicies interface {
	// AdmissionPolicies returns them all; an error when they can't be read
	// (yet).
	AdmissionPolicies(ctx context.Context) (AdmissionPolicySet, error)
}

// AdmissionPolicySet is the host's admission policies and bindings: shared
// with the informers' caches, read only.
type AdmissionPolicySet struct {
	Validating         []*admissionregistrationv1.ValidatingAdmissionPolicy
	ValidatingBindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	Mutating           []*admissionregistrationv1.MutatingAdmissionPolicy
	MutatingBindings   []*admissionregistrationv1.MutatingAdmissionPolicyBinding
}

// PolicyReviewStorage serves policyreviews.implicit.dev, a create-only
// review: the admission policies of kube-apiserver whose paramKind is a view
// that apply to the namespace, the parameters each binding resolves to there
// (as kube-apiserver resolves a paramRef without a namespace: in the
// request's namespace, through the view) and the action it takes. The host's
// policies and bindings are cluster-scoped, which a tenant may not read: a
// policy is named only when the requester may list its parameter view in the
// namespace (checked like the views, a SubjectAccessReview of the host), and
// only with the bindings that select the namespace.
type PolicyReviewStorage struct {
	review
	views    ParamViews
	policies AdmissionPolicies
	authz    authorizer.UnconditionalAuthorizer
	kinds    func() []kinds.Kind
}

var (
	_ rest.Storage              = &PolicyReviewStorage{}
	_ rest.Creater              = &PolicyReviewStorage{}
	_ rest.Scoper               = &PolicyReviewStorage{}
	_ rest.KindProvider         = &PolicyReviewStorage{}
	_ rest.SingularNameProvider = &PolicyReviewStorage{}
)

// NewPolicyReviewStorage returns the storage of policyreviews; kinds returns
// the view kinds served now (a paramKind names a view by its kind).
func NewPolicyReviewStorage(views ParamViews, policies AdmissionPolicies, authz authorizer.UnconditionalAuthorizer, kinds func() []kinds.Kind) *PolicyReviewStorage {
	return &PolicyReviewStorage{review: review{newObject: func() runtime.Object { return &v1alpha1.PolicyReview{} }, kind: "PolicyReview", singular: "policyreview"}, views: views, policies: policies, authz: authz, kinds: kinds}
}

// policy and binding are the fields of either kind the review reads.
type policy struct {
	kind, name    string
	paramKind     *admissionregistrationv1.ParamKind
	match         *admissionregistrationv1.MatchResources
	failurePolicy *admissionregistrationv1.FailurePolicyType
}

type binding struct {
	name, policyName string
	paramRef         *admissionregistrationv1.ParamRef
	match            *admissionregistrationv1.MatchResources
	// actions are the validationActions; nil for a mutating binding.
	actions []admissionregistrationv1.ValidationAction
	mutates bool
}

// Create implements rest.Creater: it answers the review in the status.
func (s *PolicyReviewStorage) Create(ctx context.Context, obj runtime.Object, validate rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	in, ok := obj.(*v1alpha1.PolicyReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a PolicyReview: %T", obj))
	}
	ns, ok := genericapirequest.NamespaceFrom(ctx)
	if !ok || ns == "" {
		return nil, apierrors.NewBadRequest("a namespace is required")
	}
	if validate != nil {
		if err := validate(ctx, obj); err != nil {
			return nil, err
		}
	}
	nsLabels, exists, err := s.views.NamespaceLabels(ns)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, apierrors.NewNotFound(v1alpha1.SchemeGroupVersion.WithResource("namespaces").GroupResource(), ns)
	}
	set, err := s.policies.AdmissionPolicies(ctx)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("the admission policies can't be read: %v", err))
	}
	policies, bindings := flatten(set)
	resources := map[string]string{}
	for _, k := range s.kinds() {
		resources[k.Kind] = k.Resource()
	}
	out := in.DeepCopy()
	out.Namespace = ns
	// Nothing is stored: no fields are managed.
	out.ManagedFields = nil
	out.Status = v1alpha1.PolicyReviewStatus{}
	for _, p := range policies {
		resource, ok := viewResource(p.paramKind, resources)
		if !ok || !selectsNamespace(p.match, nsLabels) {
			continue
		}
		// Authorized like the view: the policy is named to whoever may list
		// its parameters in the namespace.
		if allowed(ctx, s.authz, v1alpha1.SchemeGroupVersion.WithResource(resource).GroupResource(), "list", ns, "") != nil {
			continue
		}
		rp := v1alpha1.ReviewedPolicy{Kind: p.kind, Name: p.name, ParamResource: resource, FailurePolicy: string(admissionregistrationv1.Fail)}
		if p.failurePolicy != nil {
			rp.FailurePolicy = string(*p.failurePolicy)
		}
		for _, b := range bindings[p.kind+"/"+p.name] {
			if !selectsNamespace(b.match, nsLabels) {
				continue
			}
			rb, err := s.reviewBinding(ctx, b, resource, ns)
			if err != nil {
				return nil, err
			}
			rp.Bindings = append(rp.Bindings, rb)
		}
		if len(rp.Bindings) > 0 {
			out.Status.Policies = append(out.Status.Policies, rp)
		}
	}
	return out, nil
}

// reviewBinding resolves binding b's paramRef in namespace ns, and says what b does
// there.
func (s *PolicyReviewStorage) reviewBinding(ctx context.Context, b binding, resource, ns string) (v1alpha1.ReviewedBinding, error) {
	rb := v1alpha1.ReviewedBinding{Name: b.name}
	ref := b.paramRef
	if ref == nil {
		// kube-apiserver fails the binding (failurePolicy decides).
		rb.Action = v1alpha1.PolicyActionDeny
		rb.Problem = "the policy has a paramKind and the binding no paramRef: a configuration error, decided by the policy's failurePolicy"
		return rb, nil
	}
	notFound := admissionregistrationv1.DenyAction
	if ref.ParameterNotFoundAction != nil {
		notFound = *ref.ParameterNotFoundAction
	}
	rb.ParameterNotFoundAction = string(notFound)
	rb.ParamName, rb.ParamNamespace = ref.Name, ns
	if ref.Namespace != "" {
		rb.ParamNamespace = ref.Namespace
	}
	var sel labels.Selector
	if ref.Name == "" {
		var err error
		if sel, err = metav1.LabelSelectorAsSelector(ref.Selector); err != nil || ref.Selector == nil {
			rb.Action = v1alpha1.PolicyActionDeny
			rb.Problem = fmt.Sprintf("the paramRef has neither a name nor a valid selector (%v)", err)
			return rb, nil
		}
		rb.ParamSelector = sel.String()
	}
	if rb.ParamNamespace != ns {
		// The parameter comes from another namespace's view: shown only to
		// who may list that view there too.
		if allowed(ctx, s.authz, v1alpha1.SchemeGroupVersion.WithResource(resource).GroupResource(), "list", rb.ParamNamespace, "") != nil {
			rb.Problem = fmt.Sprintf("the parameter is read in the namespace %q, whose %s you may not list", rb.ParamNamespace, resource)
			return rb, nil
		}
	}
	params, err := s.views.Params(resource, rb.ParamNamespace, ref.Name, sel)
	if err != nil {
		return rb, err
	}
	rb.Params = params
	switch {
	case len(params) == 0 && notFound == admissionregistrationv1.AllowAction:
		rb.Action = v1alpha1.PolicyActionExempt
	case len(params) == 0:
		rb.Action = v1alpha1.PolicyActionDeny
		rb.Problem = "no parameter found, and parameterNotFoundAction is Deny: decided by the policy's failurePolicy"
	case b.mutates:
		rb.Action = v1alpha1.PolicyActionMutate
	default:
		actions := make([]string, len(b.actions))
		for i, a := range b.actions {
			actions[i] = string(a)
		}
		rb.Action = strings.Join(actions, ",")
	}
	return rb, nil
}

// flatten returns the policies sorted by kind and name, and their bindings
// sorted by name, by "kind/policy name".
func flatten(set AdmissionPolicySet) ([]policy, map[string][]binding) {
	var ps []policy
	for _, p := range set.Validating {
		ps = append(ps, policy{kind: v1alpha1.KindValidatingAdmissionPolicy, name: p.Name, paramKind: p.Spec.ParamKind, match: p.Spec.MatchConstraints, failurePolicy: p.Spec.FailurePolicy})
	}
	for _, p := range set.Mutating {
		ps = append(ps, policy{kind: v1alpha1.KindMutatingAdmissionPolicy, name: p.Name, paramKind: p.Spec.ParamKind, match: p.Spec.MatchConstraints, failurePolicy: p.Spec.FailurePolicy})
	}
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].kind != ps[j].kind {
			// Validating first.
			return ps[i].kind > ps[j].kind
		}
		return ps[i].name < ps[j].name
	})
	bs := map[string][]binding{}
	for _, b := range set.ValidatingBindings {
		key := v1alpha1.KindValidatingAdmissionPolicy + "/" + b.Spec.PolicyName
		bs[key] = append(bs[key], binding{name: b.Name, policyName: b.Spec.PolicyName, paramRef: b.Spec.ParamRef, match: b.Spec.MatchResources, actions: b.Spec.ValidationActions})
	}
	for _, b := range set.MutatingBindings {
		key := v1alpha1.KindMutatingAdmissionPolicy + "/" + b.Spec.PolicyName
		bs[key] = append(bs[key], binding{name: b.Name, policyName: b.Spec.PolicyName, paramRef: b.Spec.ParamRef, match: b.Spec.MatchResources, mutates: true})
	}
	for _, l := range bs {
		sort.Slice(l, func(i, j int) bool { return l[i].name < l[j].name })
	}
	return ps, bs
}

// viewResource returns the view a paramKind names (apiVersion
// implicit.dev/v1alpha1 and a served view's kind), and false if it names
// none.
func viewResource(pk *admissionregistrationv1.ParamKind, resources map[string]string) (string, bool) {
	if pk == nil || pk.APIVersion != v1alpha1.SchemeGroupVersion.String() {
		return "", false
	}
	r, ok := resources[pk.Kind]
	return r, ok
}

// selectsNamespace reports whether match's namespaceSelector selects a
// namespace labelled nsLabels, as kube-apiserver's matcher does: no
// selector, or an empty one, selects every namespace; an invalid one none.
func selectsNamespace(match *admissionregistrationv1.MatchResources, nsLabels map[string]string) bool {
	if match == nil || match.NamespaceSelector == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(match.NamespaceSelector)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(nsLabels))
}
