package registry

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// printerColumns returns what evaluates a kind's printer columns (its
// Columns and JSONPaths) on an object, by apiextensions-apiserver's table
// convertor: the code kube-apiserver shows a CRD's table with, so a view's
// columns read as its source's do. A column whose JSONPath does not parse
// is an error.
func printerColumns(k kinds.Kind) (func(runtime.Object) []any, error) {
	source := k.Source.GroupResource()
	defs := make([]apiextensionsv1.CustomResourceColumnDefinition, len(k.JSONPaths))
	for i, p := range k.JSONPaths {
		c := k.Columns[i]
		defs[i] = apiextensionsv1.CustomResourceColumnDefinition{
			Name: c.Name, Type: c.Type, Format: c.Format, Description: c.Description, Priority: c.Priority, JSONPath: p,
		}
	}
	conv, err := tableconvertor.New(defs)
	if err != nil {
		// Name the column: the convertor's error names only its JSONPath.
		for _, d := range defs {
			if _, cerr := tableconvertor.New([]apiextensionsv1.CustomResourceColumnDefinition{d}); cerr != nil {
				return nil, fmt.Errorf("printer column %q of %s: %w", d.Name, source, cerr)
			}
		}
		return nil, fmt.Errorf("printer columns of %s: %w", source, err)
	}
	// The convertor's first column is the name, which the views' tables
	// show already.
	n := len(defs)
	noHeaders := &metav1.TableOptions{NoHeaders: true}
	cells := func(obj runtime.Object) []any {
		t, err := conv.ConvertToTable(context.Background(), obj, noHeaders)
		if err != nil || len(t.Rows) != 1 || len(t.Rows[0].Cells) != n+1 {
			return make([]any, n)
		}
		return t.Rows[0].Cells[1:]
	}
	return cells, nil
}
