package registry

import "k8s.io/apimachinery/pkg/runtime"

// review is what every create-only review storage (explanations, previews,
// rulesreviews, candidateaudits, policyreviews) shares: a namespaced
// resource of one kind, never stored, so there is nothing to destroy.
type review struct {
	newObject      func() runtime.Object
	kind, singular string
}

// New implements rest.Storage.
func (r review) New() runtime.Object { return r.newObject() }

// Destroy implements rest.Storage.
func (r review) Destroy() {}

// NamespaceScoped implements rest.Scoper: a review answers for the
// request's namespace.
func (r review) NamespaceScoped() bool { return true }

// Kind implements rest.KindProvider.
func (r review) Kind() string { return r.kind }

// GetSingularName implements rest.SingularNameProvider.
func (r review) GetSingularName() string { return r.singular }
