package registry

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// printerColumns returns the table columns of a kind's printer columns and
// what evaluates them on an object, by apiextensions-apiserver's table
// convertor: the code kube-apiserver shows a CRD's table with, so a view's
// columns read as its source's do. A column whose JSONPath does not parse
// is an error.
func printerColumns(source schema.GroupResource, columns []PrinterColumn) ([]metav1.TableColumnDefinition, func(runtime.Object) []any, error) {
	defs := make([]apiextensionsv1.CustomResourceColumnDefinition, len(columns))
	for i, c := range columns {
		defs[i] = apiextensionsv1.CustomResourceColumnDefinition{
			Name: c.Name, Type: c.Type, Format: c.Format, Description: c.Description, Priority: c.Priority, JSONPath: c.JSONPath,
		}
	}
	conv, err := tableconvertor.New(defs)
	if err != nil {
		// Name the column: the convertor's error names only its JSONPath.
		for _, d := range defs {
			if _, cerr := tableconvertor.New([]apiextensionsv1.CustomResourceColumnDefinition{d}); cerr != nil {
				return nil, nil, fmt.Errorf("printer column %q of %s: %w", d.Name, source, cerr)
			}
		}
		return nil, nil, fmt.Errorf("printer columns of %s: %w", source, err)
	}
	// The convertor's first column is the name, which the views' tables
	// show already.
	empty, err := conv.ConvertToTable(context.Background(), &unstructured.Unstructured{Object: map[string]any{}}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("printer columns of %s: %w", source, err)
	}
	headers := empty.ColumnDefinitions[1:]
	noHeaders := &metav1.TableOptions{NoHeaders: true}
	cells := func(obj runtime.Object) []any {
		t, err := conv.ConvertToTable(context.Background(), obj, noHeaders)
		if err != nil || len(t.Rows) != 1 || len(t.Rows[0].Cells) != len(headers)+1 {
			return make([]any, len(headers))
		}
		return t.Rows[0].Cells[1:]
	}
	return headers, cells, nil
}
