package registry_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// fakeParamViews holds namespaces' labels and view items: "resource/namespace"
// -> items, each with its labels.
type fakeParamViews struct {
	namespaces map[string]map[string]string
	items      map[string][]fakeParam
}

type fakeParam struct {
	param  v1alpha1.PolicyParam
	labels map[string]string
}

func (f *fakeParamViews) NamespaceLabels(ns string) (map[string]string, bool, error) {
	l, ok := f.namespaces[ns]
	return l, ok, nil
}

func (f *fakeParamViews) Params(resource, namespace, name string, sel labels.Selector) ([]v1alpha1.PolicyParam, error) {
	var out []v1alpha1.PolicyParam
	for _, it := range f.items[resource+"/"+namespace] {
		if (name != "" && it.param.Name == name) || (name == "" && sel.Matches(labels.Set(it.labels))) {
			out = append(out, it.param)
		}
	}
	return out, nil
}

type fakePolicies struct {
	set registry.AdmissionPolicySet
	err error
}

func (f *fakePolicies) AdmissionPolicies(context.Context) (registry.AdmissionPolicySet, error) {
	return f.set, f.err
}

func vap(name, apiVersion, kind string, nsSelector *metav1.LabelSelector) *admissionregistrationv1.ValidatingAdmissionPolicy {
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: apiVersion, Kind: kind}
	if nsSelector != nil {
		p.Spec.MatchConstraints = &admissionregistrationv1.MatchResources{NamespaceSelector: nsSelector}
	}
	return p
}

func vapBinding(name, policy string, ref *admissionregistrationv1.ParamRef, nsSelector *metav1.LabelSelector, actions ...admissionregistrationv1.ValidationAction) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}
	b.Spec.PolicyName, b.Spec.ParamRef, b.Spec.ValidationActions = policy, ref, actions
	if nsSelector != nil {
		b.Spec.MatchResources = &admissionregistrationv1.MatchResources{NamespaceSelector: nsSelector}
	}
	return b
}

func paramRef(name string, selector map[string]string, notFound admissionregistrationv1.ParameterNotFoundActionType) *admissionregistrationv1.ParamRef {
	r := &admissionregistrationv1.ParamRef{Name: name, ParameterNotFoundAction: &notFound}
	if selector != nil {
		r.Selector = &metav1.LabelSelector{MatchLabels: selector}
	}
	return r
}

func stage(s string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"implicit.dev/stage": s}}
}

// TestPolicyReviewStorage: a policy review lists, for the namespace, the
// admission policies whose paramKind is a view the requester may list
// there, with only the bindings that select the namespace, the parameters
// each resolves to in the namespace and the action it takes; policies whose
// own namespaceSelector leaves the namespace out, whose paramKind is no
// view, or whose view the requester may not list, are not named.
func TestPolicyReviewStorage(t *testing.T) {
	t.Parallel()
	const (
		view  = "implicit.dev/v1alpha1"
		allow = admissionregistrationv1.AllowAction
		deny  = admissionregistrationv1.DenyAction
	)
	limits := v1alpha1.PolicyParam{Name: "limits", Scope: "parent", Namespace: "org", Overlays: []string{"team-a/limits"}}
	views := &fakeParamViews{
		namespaces: map[string]map[string]string{"team-a": {"implicit.dev/stage": "canary"}, "team-b": {}},
		items: map[string][]fakeParam{
			"configmaps/team-a": {{param: limits}, {param: v1alpha1.PolicyParam{Name: "defaults", Scope: "global", Namespace: "implicit-global"}, labels: map[string]string{"app": "web"}}},
			"configmaps/org":    {{param: v1alpha1.PolicyParam{Name: "limits", Scope: "local", Namespace: "org"}}},
		},
	}
	mutating := &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "defaults"}}
	mutating.Spec.ParamKind = &admissionregistrationv1.ParamKind{APIVersion: view, Kind: "ConfigMap"}
	mutBinding := func(name string, ref *admissionregistrationv1.ParamRef) *admissionregistrationv1.MutatingAdmissionPolicyBinding {
		b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}}
		b.Spec.PolicyName, b.Spec.ParamRef = "defaults", ref
		return b
	}
	policies := &fakePolicies{set: registry.AdmissionPolicySet{
		Validating: []*admissionregistrationv1.ValidatingAdmissionPolicy{
			vap("limit", view, "ConfigMap", nil),
			vap("not-a-view", "v1", "ConfigMap", nil),
			vap("prod-only", view, "ConfigMap", stage("prod")),
			vap("secret-limit", view, "Secret", nil),
		},
		ValidatingBindings: []*admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			vapBinding("limit-audit", "limit", paramRef("limits", nil, allow), nil, admissionregistrationv1.Audit, admissionregistrationv1.Warn),
			vapBinding("limit-canary", "limit", paramRef("limits", nil, deny), stage("canary"), admissionregistrationv1.Deny),
			vapBinding("limit-prod", "limit", paramRef("limits", nil, deny), stage("prod"), admissionregistrationv1.Deny),
			vapBinding("limit-missing-allow", "limit", paramRef("nothing", nil, allow), nil, admissionregistrationv1.Deny),
			vapBinding("limit-missing-deny", "limit", paramRef("nothing", nil, deny), nil, admissionregistrationv1.Deny),
			vapBinding("limit-no-ref", "limit", nil, nil, admissionregistrationv1.Deny),
			vapBinding("not-a-view-b", "not-a-view", paramRef("limits", nil, deny), nil, admissionregistrationv1.Deny),
			vapBinding("prod-only-b", "prod-only", paramRef("limits", nil, deny), nil, admissionregistrationv1.Deny),
			vapBinding("secret-limit-b", "secret-limit", paramRef("limits", nil, deny), nil, admissionregistrationv1.Deny),
		},
		Mutating: []*admissionregistrationv1.MutatingAdmissionPolicy{mutating},
		MutatingBindings: []*admissionregistrationv1.MutatingAdmissionPolicyBinding{
			mutBinding("defaults-web", paramRef("", map[string]string{"app": "web"}, deny)),
			mutBinding("defaults-org", &admissionregistrationv1.ParamRef{Name: "limits", Namespace: "org"}),
		},
	}}
	served := func() []kinds.Kind {
		return []kinds.Kind{
			{Source: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap"},
			{Source: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Kind: "Secret"},
		}
	}
	authorizer := &fakeAuthorizer{allow: map[string]bool{
		"dana list implicit.dev/configmaps team-a/": true,
		"dana list implicit.dev/configmaps team-b/": true,
	}}
	s := registry.NewPolicyReviewStorage(views, policies, authorizer, served)

	obj, err := s.Create(asUser("dana", "team-a"), &v1alpha1.PolicyReview{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := obj.(*v1alpha1.PolicyReview)
	fail := string(admissionregistrationv1.Fail)
	want := []v1alpha1.ReviewedPolicy{
		{Kind: v1alpha1.KindValidatingAdmissionPolicy, Name: "limit", ParamResource: "configmaps", FailurePolicy: fail, Bindings: []v1alpha1.ReviewedBinding{
			{Name: "limit-audit", Action: "Audit,Warn", ParameterNotFoundAction: "Allow", ParamName: "limits", ParamNamespace: "team-a", Params: []v1alpha1.PolicyParam{limits}},
			{Name: "limit-canary", Action: "Deny", ParameterNotFoundAction: "Deny", ParamName: "limits", ParamNamespace: "team-a", Params: []v1alpha1.PolicyParam{limits}},
			{Name: "limit-missing-allow", Action: "exempt", ParameterNotFoundAction: "Allow", ParamName: "nothing", ParamNamespace: "team-a"},
			{Name: "limit-missing-deny", Action: "Deny", ParameterNotFoundAction: "Deny", ParamName: "nothing", ParamNamespace: "team-a",
				Problem: "no parameter found, and parameterNotFoundAction is Deny: decided by the policy's failurePolicy"},
			{Name: "limit-no-ref", Action: "Deny",
				Problem: "the policy has a paramKind and the binding no paramRef: a configuration error, decided by the policy's failurePolicy"},
		}},
		{Kind: v1alpha1.KindMutatingAdmissionPolicy, Name: "defaults", ParamResource: "configmaps", FailurePolicy: fail, Bindings: []v1alpha1.ReviewedBinding{
			{Name: "defaults-org", ParamName: "limits", ParamNamespace: "org", ParameterNotFoundAction: "Deny",
				Problem: `the parameter is read in the namespace "org", whose configmaps you may not list`},
			{Name: "defaults-web", Action: "Mutate", ParameterNotFoundAction: "Deny", ParamSelector: "app=web", ParamNamespace: "team-a",
				Params: []v1alpha1.PolicyParam{{Name: "defaults", Scope: "global", Namespace: "implicit-global"}}},
		}},
	}
	if got.Namespace != "team-a" || !reflect.DeepEqual(got.Status.Policies, want) {
		t.Errorf("review of team-a (namespace %q):\n got  %+v\n want %+v", got.Namespace, got.Status.Policies, want)
	}

	// Who may list configmaps in org too sees the parameter read there.
	authorizer.allow["dana list implicit.dev/configmaps org/"] = true
	obj, err = s.Create(asUser("dana", "team-a"), &v1alpha1.PolicyReview{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	mut := obj.(*v1alpha1.PolicyReview).Status.Policies[1].Bindings[0]
	if mut.Action != "Mutate" || len(mut.Params) != 1 || mut.Params[0].Scope != "local" || mut.Problem != "" {
		t.Errorf("defaults-org with list in org: %+v", mut)
	}

	// team-b is no canary: the canary binding is not named there.
	obj, err = s.Create(asUser("dana", "team-b"), &v1alpha1.PolicyReview{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range obj.(*v1alpha1.PolicyReview).Status.Policies {
		for _, b := range p.Bindings {
			if b.Name == "limit-canary" {
				t.Errorf("team-b: the canary binding is named: %+v", b)
			}
		}
	}

	// Who may not list the view is told of no policy.
	obj, err = s.Create(asUser("eve", "team-a"), &v1alpha1.PolicyReview{}, nil, nil)
	if err != nil || len(obj.(*v1alpha1.PolicyReview).Status.Policies) != 0 {
		t.Errorf("eve: %v, %+v; want no policy", err, obj)
	}
	if _, err := s.Create(asUser("dana", "nowhere"), &v1alpha1.PolicyReview{}, nil, nil); !apierrors.IsNotFound(err) {
		t.Errorf("missing namespace: %v, want NotFound", err)
	}
	policies.err = errors.New("not synced")
	if _, err := s.Create(asUser("dana", "team-a"), &v1alpha1.PolicyReview{}, nil, nil); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("policies unread: %v, want ServiceUnavailable", err)
	}
}
