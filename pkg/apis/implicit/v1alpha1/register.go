package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the views and of these answers.
const GroupName = "implicit.dev"

// SchemeGroupVersion is implicit.dev/v1alpha1.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// The resources of these kinds.
const (
	ResourceHierarchies  = "hierarchies"
	ResourceExplanations = "explanations"
	ResourcePreviews     = "previews"
	ResourceRulesReviews = "rulesreviews"
	// ResourceCandidateAudits is the audit of candidates (types_audit.go).
	ResourceCandidateAudits = "candidateaudits"
	// ResourcePolicyReviews is the review of admission policies (types_policy.go).
	ResourcePolicyReviews = "policyreviews"
	// ResourceExceptions is the namespaces' exceptions (types_exceptions.go).
	ResourceExceptions = "exceptions"
)

// Resources are the plural names of the answers: a view can't take them.
var Resources = []string{ResourceHierarchies, ResourceExplanations, ResourcePreviews, ResourceRulesReviews, ResourceCandidateAudits, ResourcePolicyReviews, ResourceExceptions}

// AddKnownTypes registers the kinds in s under implicit.dev/v1alpha1.
func AddKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion,
		&Hierarchy{}, &HierarchyList{},
		&Explanation{},
		&Preview{},
		&RulesReview{},
		&CandidateAudit{},
		&PolicyReview{},
		&Exception{}, &ExceptionList{},
	)
	return nil
}
