package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PolicyReview asks which admission policies of kube-apiserver
// (ValidatingAdmissionPolicy, MutatingAdmissionPolicy) take their parameters
// from a view in the PolicyReview's namespace, which parameters the
// namespace inherits and what each binding does there. Create it, and the
// answer comes back in its status. It is never stored. It names only the
// policies whose parameter view the requester may list in the namespace,
// and of those only the bindings that select the namespace.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type PolicyReview struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status PolicyReviewStatus `json:"status,omitempty"`
}

// PolicyReviewStatus is the answer.
type PolicyReviewStatus struct {
	// Policies are the policies whose paramKind is a view and which apply
	// to the namespace, sorted by kind and name.
	// +listType=atomic
	Policies []ReviewedPolicy `json:"policies,omitempty"`
}

// The kinds of ReviewedPolicy.
const (
	KindValidatingAdmissionPolicy = "ValidatingAdmissionPolicy"
	KindMutatingAdmissionPolicy   = "MutatingAdmissionPolicy"
)

// The actions of a ReviewedBinding besides its validationActions.
const (
	// PolicyActionExempt: no parameter, and parameterNotFoundAction Allow.
	PolicyActionExempt = "exempt"
	// PolicyActionMutate: a MutatingAdmissionPolicyBinding's parameters found.
	PolicyActionMutate = "Mutate"
	// PolicyActionDeny: no parameter, and parameterNotFoundAction Deny
	// (decided by the policy's failurePolicy).
	PolicyActionDeny = "Deny"
)

// ReviewedPolicy is one policy that applies to the namespace.
type ReviewedPolicy struct {
	// Kind is ValidatingAdmissionPolicy or MutatingAdmissionPolicy.
	Kind string `json:"kind"`
	// Name is the policy's.
	Name string `json:"name"`
	// ParamResource is the view its paramKind names (e.g. configmaps).
	ParamResource string `json:"paramResource"`
	// FailurePolicy is the policy's (Fail when unset).
	FailurePolicy string `json:"failurePolicy,omitempty"`
	// Bindings are its bindings that select the namespace, sorted by name.
	// +listType=atomic
	Bindings []ReviewedBinding `json:"bindings,omitempty"`
}

// ReviewedBinding is what one binding does in the namespace.
type ReviewedBinding struct {
	// Name is the binding's.
	Name string `json:"name"`
	// Action is what it does there: its validationActions joined by ","
	// (Deny, Warn, Audit), Mutate, exempt (no parameter, and
	// parameterNotFoundAction Allow) or Deny (no parameter, and
	// parameterNotFoundAction Deny).
	Action string `json:"action"`
	// ParameterNotFoundAction is the binding's (Deny when unset).
	ParameterNotFoundAction string `json:"parameterNotFoundAction,omitempty"`
	// ParamName and ParamSelector are the binding's paramRef; ParamNamespace
	// is where it resolves: the namespace, unless the paramRef names one.
	ParamName      string `json:"paramName,omitempty"`
	ParamSelector  string `json:"paramSelector,omitempty"`
	ParamNamespace string `json:"paramNamespace,omitempty"`
	// Params are the view items the namespace inherits that the paramRef
	// resolves to, after merge, sorted by name.
	// +listType=atomic
	Params []PolicyParam `json:"params,omitempty"`
	// Problem says why the binding can't be evaluated as intended, if so
	// (no paramRef, a parameter the requester may not list).
	Problem string `json:"problem,omitempty"`
}

// PolicyParam is one view item a binding takes as its parameter, and where
// it comes from.
type PolicyParam struct {
	// Name is the view item's.
	Name string `json:"name"`
	// Scope (global, ancestor, local) and Namespace are its winning source's.
	Scope     string `json:"scope"`
	Namespace string `json:"namespace"`
	// Overlays are the lower-scope sources merged onto it ("namespace/name"),
	// top down.
	// +listType=atomic
	Overlays []string `json:"overlays,omitempty"`
	// Candidate names the candidates the view item holds the content of,
	// when the namespace is a canary of a staged rollout of the parameter
	// (the view item's implicit.dev/candidate): the parameter the namespace
	// is enforced with.
	Candidate string `json:"candidate,omitempty"`
}
