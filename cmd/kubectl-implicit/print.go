package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/util/jsonpath"
)

// outputFormats are the -o forms, kubectl's: the table by default and with
// wide, and cli-runtime's printers for the others.
const outputFormats = "json, yaml, kyaml, name, go-template=..., go-template-file=..., jsonpath=..., jsonpath-as-json=..., jsonpath-file=..., custom-columns=..., wide"

// isTable reports whether -o format asks for the command's own table:
// no -o, or -o wide.
func isTable(format string) bool { return format == "" || format == "wide" }

const customColumnsPrefix = "custom-columns="

// validateOutput checks -o format before anything is asked of the server.
func validateOutput(format string) error {
	if isTable(format) {
		return nil
	}
	if spec, ok := strings.CutPrefix(format, customColumnsPrefix); ok {
		_, err := parseCustomColumns(spec)
		return err
	}
	if _, err := genericclioptions.NewPrintFlags("").WithDefaultOutput(format).ToPrinter(); err != nil {
		if genericclioptions.IsNoCompatiblePrinterError(err) {
			return fmt.Errorf("--output %q: want one of %s (default: a table)", format, outputFormats)
		}
		return fmt.Errorf("--output %q: %w", format, err)
	}
	return nil
}

// printObject prints obj as -o format asks, with cli-runtime's printers as
// kubectl does (json and yaml without managedFields, name, the templates),
// or as custom columns. obj is a runtime.Object with its apiVersion and kind
// set, or a struct or map that converts to one.
func printObject(w io.Writer, format string, obj any) error {
	ro, err := toObject(obj)
	if err != nil {
		return err
	}
	if spec, ok := strings.CutPrefix(format, customColumnsPrefix); ok {
		return printCustomColumns(w, spec, ro)
	}
	p, err := genericclioptions.NewPrintFlags("").WithDefaultOutput(format).ToPrinter()
	if err != nil {
		return err
	}
	if format == "name" && meta.IsListType(ro) {
		// As kubectl get -o name: a line per item.
		items, err := meta.ExtractList(ro)
		if err != nil {
			return err
		}
		for _, it := range items {
			if err := p.PrintObj(it, w); err != nil {
				return err
			}
		}
		return nil
	}
	return p.PrintObj(ro, w)
}

// toObject makes obj a runtime.Object for the printers.
func toObject(obj any) (runtime.Object, error) {
	switch o := obj.(type) {
	case runtime.Object:
		return o, nil
	case map[string]any:
		return &unstructured.Unstructured{Object: o}, nil
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	return u, json.Unmarshal(b, &u.Object)
}

// column is one column of -o custom-columns.
type column struct {
	header string
	path   *jsonpath.JSONPath
}

// parseCustomColumns parses HEADER:PATH[,HEADER:PATH...], PATH a JSONPath
// with or without braces and leading dot (.metadata.name, {.spec.x}), as
// kubectl does.
func parseCustomColumns(spec string) ([]column, error) {
	if spec == "" {
		return nil, errors.New("custom-columns format specified but no custom columns given")
	}
	var cols []column
	for _, part := range strings.Split(spec, ",") {
		header, path, ok := strings.Cut(part, ":")
		if !ok || header == "" {
			return nil, fmt.Errorf("unexpected custom-columns spec: %s, expected <header>:<json-path-expr>", part)
		}
		p := jsonpath.New(header).AllowMissingKeys(true)
		if err := p.Parse(relaxedJSONPath(path)); err != nil {
			return nil, fmt.Errorf("custom-columns %s: %w", header, err)
		}
		cols = append(cols, column{header: header, path: p})
	}
	return cols, nil
}

// relaxedJSONPath wraps .a.b (or a.b) as {.a.b}, as kubectl's
// custom-columns and jsonpath accept.
func relaxedJSONPath(path string) string {
	path = strings.TrimSpace(path)
	if strings.HasPrefix(path, "{") && strings.HasSuffix(path, "}") {
		path = path[1 : len(path)-1]
	}
	if !strings.HasPrefix(path, ".") {
		path = "." + path
	}
	return "{" + path + "}"
}

// printCustomColumns prints one row per object (per item of a list), a
// cell per column: the JSONPath's values, comma-separated, or <none>.
func printCustomColumns(w io.Writer, spec string, obj runtime.Object) error {
	cols, err := parseCustomColumns(spec)
	if err != nil {
		return err
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	var content map[string]any
	if err := json.Unmarshal(b, &content); err != nil {
		return err
	}
	rows := []any{content}
	if items, ok := content["items"].([]any); ok && strings.HasSuffix(fmt.Sprint(content["kind"]), "List") {
		rows = items
	}
	tw := tabwriter.NewWriter(w, 5, 8, 3, ' ', 0)
	headers := make([]string, len(cols))
	for i, c := range cols {
		headers[i] = c.header
	}
	fmt.Fprintln(tw, strings.Join(headers, "\t"))
	for _, row := range rows {
		cells := make([]string, len(cols))
		for i, c := range cols {
			results, err := c.path.FindResults(row)
			if err != nil {
				return err
			}
			var vals []string
			for _, r := range results {
				for _, v := range r {
					vals = append(vals, cell(v.Interface()))
				}
			}
			cells[i] = strings.Join(vals, ",")
			if cells[i] == "" {
				cells[i] = "<none>"
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// cell prints a custom column's value: a string or number as it is, a map
// or list as JSON.
func cell(v any) string {
	switch v.(type) {
	case map[string]any, []any:
		b, err := json.Marshal(v)
		if err == nil {
			return string(b)
		}
	}
	return fmt.Sprint(v)
}

// table prints rows under upper-case headers, aligned as kubectl does.
type table struct {
	w *tabwriter.Writer
}

func newTable(w io.Writer, headers ...string) *table {
	t := &table{w: tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)}
	t.row(headers...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "<none>"
		}
	}
	fmt.Fprintln(t.w, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.w.Flush() }
