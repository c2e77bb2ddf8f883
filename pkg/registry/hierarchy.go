package registry

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// Hierarchies answers where namespaces stand in the hierarchy: *answers.Answers.
type Hierarchies interface {
	// Hierarchy returns namespace's, and false if it does not exist.
	Hierarchy(namespace string) (v1alpha1.HierarchyStatus, bool, error)
	// Hierarchies returns every namespace's, by namespace.
	Hierarchies() (map[string]v1alpha1.HierarchyStatus, error)
}

// HierarchyStorage serves hierarchies.implicit.dev: one read-only Hierarchy
// per namespace, named like it. Who may get it is RBAC's to say (it is
// aggregated into view): it names the namespace's ancestors, which its views
// name already, and the children that inherit from it.
type HierarchyStorage struct {
	src Hierarchies
}

var (
	_ rest.Storage              = &HierarchyStorage{}
	_ rest.Getter               = &HierarchyStorage{}
	_ rest.Lister               = &HierarchyStorage{}
	_ rest.Scoper               = &HierarchyStorage{}
	_ rest.KindProvider         = &HierarchyStorage{}
	_ rest.SingularNameProvider = &HierarchyStorage{}
	_ rest.TableConvertor       = &HierarchyStorage{}
)

// NewHierarchyStorage returns the storage of hierarchies, read from src.
func NewHierarchyStorage(src Hierarchies) *HierarchyStorage { return &HierarchyStorage{src: src} }

// New implements rest.Storage.
func (s *HierarchyStorage) New() runtime.Object { return &v1alpha1.Hierarchy{} }

// Destroy implements rest.Storage.
func (s *HierarchyStorage) Destroy() {}

// NewList implements rest.Lister.
func (s *HierarchyStorage) NewList() runtime.Object { return &v1alpha1.HierarchyList{} }

// NamespaceScoped implements rest.Scoper.
func (s *HierarchyStorage) NamespaceScoped() bool { return true }

// Kind implements rest.KindProvider.
func (s *HierarchyStorage) Kind() string { return "Hierarchy" }

// GetSingularName implements rest.SingularNameProvider.
func (s *HierarchyStorage) GetSingularName() string { return "hierarchy" }

// Get implements rest.Getter: the namespace's Hierarchy, whose name is the
// namespace's; any other name is NotFound.
func (s *HierarchyStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns, ok := genericapirequest.NamespaceFrom(ctx)
	if !ok || ns == "" {
		return nil, apierrors.NewBadRequest("a namespace is required")
	}
	gr := v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.ResourceHierarchies).GroupResource()
	if name != ns {
		return nil, apierrors.NewNotFound(gr, name)
	}
	h, exists, err := s.src.Hierarchy(ns)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, apierrors.NewNotFound(gr, name)
	}
	return hierarchy(ns, h), nil
}

// List implements rest.Lister: the namespace's Hierarchy, or every
// namespace's (sorted) without one; field selectors on metadata.name and
// metadata.namespace.
func (s *HierarchyStorage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	all := map[string]v1alpha1.HierarchyStatus{}
	if ns != "" {
		h, exists, err := s.src.Hierarchy(ns)
		if err != nil {
			return nil, err
		}
		if exists {
			all[ns] = h
		}
	} else {
		var err error
		if all, err = s.src.Hierarchies(); err != nil {
			return nil, err
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	out := &v1alpha1.HierarchyList{}
	for _, n := range names {
		if opts != nil && opts.FieldSelector != nil && !opts.FieldSelector.Matches(fields.Set{"metadata.name": n, "metadata.namespace": n}) {
			continue
		}
		out.Items = append(out.Items, *hierarchy(n, all[n]))
	}
	return out, nil
}

func hierarchy(namespace string, h v1alpha1.HierarchyStatus) *v1alpha1.Hierarchy {
	return &v1alpha1.Hierarchy{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Hierarchy"},
		ObjectMeta: metav1.ObjectMeta{Name: namespace, Namespace: namespace},
		Status:     h,
	}
}

// ConvertToTable implements rest.TableConvertor: NAME, TENANT, PARENT,
// ANCESTORS, CHILDREN, PROBLEMS.
func (s *HierarchyStorage) ConvertToTable(_ context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{}
	if to, ok := opts.(*metav1.TableOptions); !ok || !to.NoHeaders {
		table.ColumnDefinitions = []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name", Description: "The namespace."},
			{Name: "Tenant", Type: "string", Description: "Whether the namespace inherits."},
			{Name: "Parent", Type: "string", Description: "The implicit.dev/parent label."},
			{Name: "Ancestors", Type: "string", Description: "The namespaces inherited from, nearest first."},
			{Name: "Children", Type: "string", Description: "The namespaces inheriting from this one directly."},
			{Name: "Problems", Type: "string", Description: "Hierarchy problems: Cycle, MissingParent, InvalidParent, ParentUIDMismatch, DepthExceeded."},
		}
	}
	var items []v1alpha1.Hierarchy
	switch o := obj.(type) {
	case *v1alpha1.Hierarchy:
		items = []v1alpha1.Hierarchy{*o}
	case *v1alpha1.HierarchyList:
		items = o.Items
	default:
		return nil, fmt.Errorf("table of hierarchies: unexpected %T", obj)
	}
	for i := range items {
		h := &items[i]
		var problems []string
		for _, p := range h.Status.Problems {
			problems = append(problems, p.Reason)
		}
		table.Rows = append(table.Rows, metav1.TableRow{
			Cells: []any{h.Name, fmt.Sprint(h.Status.Tenant), orNone(h.Status.Parent), orNone(strings.Join(h.Status.Ancestors, ",")),
				orNone(strings.Join(h.Status.Children, ",")), orNone(strings.Join(problems, ","))},
			Object: runtime.RawExtension{Object: h},
		})
	}
	return table, nil
}
