package registry

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/util/jsonpath"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// Cells returns how a table finds an item's values for k's columns: the
// kind's own Cells, or its columns' JSONPaths evaluated as kube-apiserver
// evaluates a CustomResourceDefinition's printer columns. The error names a
// JSONPath that does not parse: such a kind can't be served.
func Cells(k kinds.Kind) (func(runtime.Object) []any, error) {
	if k.Cells != nil {
		return k.Cells, nil
	}
	return columnCells(k)
}

func columnCells(k kinds.Kind) (func(runtime.Object) []any, error) {
	paths := make([]*jsonpath.JSONPath, 0, len(k.JSONPaths))
	for i, p := range k.JSONPaths {
		jp := jsonpath.New(k.Columns[i].Name).AllowMissingKeys(true)
		if err := jp.Parse(fmt.Sprintf("{%s}", p)); err != nil {
			return nil, fmt.Errorf("printer column %q of %s: JSONPath %q: %w", k.Columns[i].Name, k.Source.GroupResource(), p, err)
		}
		paths = append(paths, jp)
	}
	return func(obj runtime.Object) []any {
		cells := make([]any, len(k.Columns))
		content, ok := contentOf(obj)
		if !ok {
			return cells
		}
		for i, jp := range paths {
			cells[i] = cell(jp, k.Columns[i].Type, content)
		}
		return cells
	}, nil
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
