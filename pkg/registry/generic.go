package registry

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/util/jsonpath"
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
	paths := make([]*jsonpath.JSONPath, 0, len(g.Columns))
	for _, c := range g.Columns {
		jp := jsonpath.New(c.Name).AllowMissingKeys(true)
		if err := jp.Parse(fmt.Sprintf("{%s}", c.JSONPath)); err != nil {
			return Kind{}, fmt.Errorf("printer column %q of %s: JSONPath %q: %w", c.Name, g.Source.GroupResource(), c.JSONPath, err)
		}
		paths = append(paths, jp)
		k.Columns = append(k.Columns, metav1.TableColumnDefinition{
			Name: c.Name, Type: c.Type, Format: c.Format, Description: c.Description, Priority: c.Priority,
		})
	}
	k.Cells = func(obj runtime.Object) []any {
		cells := make([]any, len(paths))
		content, ok := contentOf(obj)
		if !ok {
			return cells
		}
		for i, jp := range paths {
			cells[i] = cell(jp, g.Columns[i].Type, content)
		}
		return cells
	}
	return k, nil
}

// contentOf returns obj's fields as unstructured content.
func contentOf(obj runtime.Object) (map[string]any, bool) {
	if u, ok := obj.(runtime.Unstructured); ok {
		return u.UnstructuredContent(), true
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	return content, err == nil
}

// cell evaluates one printer column on an object, as kubectl shows a CRD's
// columns: the first value found, formatted by the column's type; nil (shown
// as <none>) when the path finds nothing.
func cell(jp *jsonpath.JSONPath, typ string, content map[string]any) any {
	results, err := jp.FindResults(content)
	if err != nil || len(results) == 0 || len(results[0]) == 0 {
		return nil
	}
	v := results[0][0]
	if !v.IsValid() || !v.CanInterface() {
		return nil
	}
	val := v.Interface()
	if val == nil {
		return nil
	}
	switch typ {
	case "integer":
		switch n := val.(type) {
		case int64:
			return n
		case float64:
			return int64(n)
		}
	case "number":
		switch n := val.(type) {
		case int64:
			return float64(n)
		case float64:
			return n
		}
	case "boolean":
		if b, ok := val.(bool); ok {
			return b
		}
	case "date":
		if s, ok := val.(string); ok {
			if t, err := time.Parse(time.RFC3339, s); err == nil {
				return duration.HumanDuration(time.Since(t))
			}
		}
	}
	switch reflect.ValueOf(val).Kind() {
	case reflect.Map, reflect.Slice:
		// kube-apiserver prints a CRD's object or list cell as JSON.
		b, err := json.Marshal(val)
		if err != nil {
			return nil
		}
		return string(b)
	}
	if s, ok := val.(string); ok {
		return strings.TrimSpace(s)
	}
	return fmt.Sprint(val)
}
