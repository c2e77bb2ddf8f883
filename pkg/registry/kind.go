package registry

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kind describes one view resource: the source kind it mirrors and how its
// items print in a table.
type Kind struct {
	// Source is the resource the view is merged from, e.g. rbac.authorization.k8s.io/v1 rolebindings.
	Source schema.GroupVersionResource
	// Kind and Singular name the source kind, reused by the view.
	Kind     string
	Singular string
	// New and NewList return empty objects of the source's Go types.
	New     func() runtime.Object
	NewList func() runtime.Object
	// Columns are the kind's own table columns, printed between NAME and SCOPE.
	Columns []metav1.TableColumnDefinition
	// Cells returns an item's values for Columns.
	Cells func(obj runtime.Object) []any
	// Model is the OpenAPI model name of the source kind in the host
	// cluster's documents (io.k8s.api.rbac.v1.RoleBinding), the view's schema.
	Model string
	// Generic kinds are served from unstructured objects (see Generic).
	generic bool
}

// Unstructured reports whether the kind is served from unstructured objects.
func (k Kind) Unstructured() bool { return k.generic }

// Resource is the plural name of the view, the same as its source's.
func (k Kind) Resource() string { return k.Source.Resource }
