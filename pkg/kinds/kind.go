package kinds

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// Delivery says how a kind's view reaches its readers.
type Delivery string

// The deliveries of a kind.
const (
	// DeliveryView serves the view only (the default).
	DeliveryView Delivery = "View"
	// DeliveryMaterialize also writes the view's inherited items as real
	// objects of the source kind into each tenant namespace
	// (pkg/materialize), for engines that read only real objects.
	DeliveryMaterialize Delivery = "Materialize"
)

// Kind is one served kind: the source it is read from, how its sources
// merge, how its view is delivered, and how the view presents its items.
// Its view is named by the source's resource, in implicit.dev/v1alpha1.
//
// A built-in kind has its presentation from the start (BuiltIn). A kind
// configured from a file has none until the host serves it: the kind
// controller then completes it with WithHostNames.
type Kind struct {
	// Source is the host's kind the view is made of, e.g.
	// rbac.authorization.k8s.io/v1 rolebindings.
	Source schema.GroupVersionResource
	// Strategy is how a lower scope's item meets an inherited one of the
	// same name (Replace when empty).
	Strategy merge.Strategy
	// GlobalNamespace, when set, holds this kind's global sources instead
	// of the policy's global namespace. It is never a tenant.
	GlobalNamespace string
	// Delivery is DeliveryView ("" too) or DeliveryMaterialize.
	Delivery Delivery
	// AggregateTo names the default roles (view, edit, admin) that may read
	// the view of a kind that is not built in; the chart renders the
	// ClusterRole, the server never writes one.
	AggregateTo []string

	// Kind and Singular name the source kind, reused by the view.
	Kind     string
	Singular string
	// ShortNames are the view's short names in discovery (kubectl get irb):
	// "i" and the source's customary abbreviation, so that none is a short
	// name kubectl ships for its own kinds (netpol is NetworkPolicies') nor
	// one of a CRD the cluster serves. Configured kinds have none.
	ShortNames []string
	// New and NewList return empty objects of the kind's Go types (typed
	// kinds) or unstructured objects of the view's kind.
	New     func() runtime.Object
	NewList func() runtime.Object
	// Columns are the kind's own table columns, printed between NAME and SCOPE.
	Columns []metav1.TableColumnDefinition
	// Cells returns a typed item's values for Columns. A kind served from
	// unstructured objects has none: JSONPaths says where each column's
	// value is, and pkg/registry evaluates them.
	Cells     func(obj runtime.Object) []any
	JSONPaths []string
	// Model is the OpenAPI model name of the source kind in the host
	// cluster's documents (io.k8s.api.rbac.v1.RoleBinding), the view's schema.
	Model string

	// typed kinds are served from their Go types from the start.
	typed bool
}

// Resource is the view's resource: the source's plural name.
func (k Kind) Resource() string { return k.Source.Resource }

// Typed reports whether the kind is a built-in one, served from its Go type
// from the start; the others are served from unstructured objects once the
// host serves them.
func (k Kind) Typed() bool { return k.typed }

// Unstructured reports whether the kind is served from unstructured objects.
func (k Kind) Unstructured() bool { return !k.typed }

// Presented reports whether the kind knows how to present its items: a
// built-in kind always, another once WithHostNames has completed it.
func (k Kind) Presented() bool { return k.New != nil }

// Materialized reports whether the view's items are also written as objects.
func (k Kind) Materialized() bool { return k.Delivery == DeliveryMaterialize }

// String describes a kind for logs and errors.
func (k Kind) String() string { return fmt.Sprintf("%s (%s)", k.Source, k.Strategy) }

// HostNames are what the host says of a kind that is not built in: its
// names (discovery), its OpenAPI model and its printer columns (a
// CustomResourceDefinition's additionalPrinterColumns).
type HostNames struct {
	Kind, Singular string
	Model          string
	Columns        []PrinterColumn
}

// PrinterColumn is a column of a kind's table, as a
// CustomResourceDefinition's additionalPrinterColumns declare it.
type PrinterColumn struct {
	Name        string
	Type        string
	Format      string
	Description string
	Priority    int32
	JSONPath    string
}

// WithHostNames completes a kind served from unstructured objects with what
// the host says of it; its view's objects are unstructured objects of the
// view's group version. Whether each column's JSONPath parses is checked
// when its storage is made (pkg/registry).
func (k Kind) WithHostNames(h HostNames, view schema.GroupVersion) Kind {
	k.typed = false
	k.Kind, k.Singular, k.Model = h.Kind, h.Singular, h.Model
	gvk, listGVK := view.WithKind(h.Kind), view.WithKind(h.Kind+"List")
	k.New = func() runtime.Object { return newUnstructured(gvk) }
	k.NewList = func() runtime.Object { return newUnstructuredList(listGVK) }
	k.Columns, k.JSONPaths, k.Cells = nil, nil, nil
	for _, c := range h.Columns {
		k.Columns = append(k.Columns, metav1.TableColumnDefinition{
			Name: c.Name, Type: c.Type, Format: c.Format, Description: c.Description, Priority: c.Priority,
		})
		k.JSONPaths = append(k.JSONPaths, c.JSONPath)
	}
	return k
}
