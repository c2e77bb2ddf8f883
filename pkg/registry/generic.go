package registry

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PrinterColumn is a column of a kind's table, as a CustomResourceDefinition's
// additionalPrinterColumns declare it.
type PrinterColumn struct {
	Name        string
	Type        string
	Format      string
	Description string
	Priority    int32
	JSONPath    string
}

// GenericSource describes a source kind served from unstructured objects:
// any namespaced kind, built-in or custom.
type GenericSource struct {
	// Source is the resource the view is merged from.
	Source schema.GroupVersionResource
	// View is the group version the view is served in.
	View schema.GroupVersion
	// Kind and Singular are the source kind's, from the host's discovery.
	Kind, Singular string
	// Model is the source kind's OpenAPI model name in the host's documents.
	Model string
	// Columns are the kind's printer columns (a CRD's
	// additionalPrinterColumns); none for other kinds.
	Columns []PrinterColumn
}

// Generic returns the Kind of a source served from unstructured objects.
// A column whose JSONPath does not parse is an error.
func Generic(g GenericSource) (Kind, error) {
	gvk := g.View.WithKind(g.Kind)
	k := Kind{
		Source:   g.Source,
		Kind:     g.Kind,
		Singular: g.Singular,
		Model:    g.Model,
		generic:  true,
		New: func() runtime.Object {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			return u
		},
		NewList: func() runtime.Object {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(g.View.WithKind(g.Kind + "List"))
			return l
		},
	}
	columns, cells, err := printerColumns(g.Source.GroupResource(), g.Columns)
	if err != nil {
		return Kind{}, err
	}
	k.Columns, k.Cells = columns, cells
	return k, nil
}
