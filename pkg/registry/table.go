package registry

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// tableConvertor prints view items: NAME, the kind's own columns, SCOPE,
// SOURCE (the winning source's namespace) and AGE; with -o wide also
// LOCKED, OVERLAYS and CONFLICT, what merging did to the item.
type tableConvertor struct {
	kind  kinds.Kind
	cells func(runtime.Object) []any
}

// newTableConvertor prints k's items; a column whose JSONPath does not
// parse (Cells) prints empty cells.
func newTableConvertor(k kinds.Kind) tableConvertor {
	cells, err := Cells(k)
	if err != nil {
		cells = func(runtime.Object) []any { return make([]any, len(k.Columns)) }
	}
	return tableConvertor{kind: k, cells: cells}
}

func (t tableConvertor) columns() []metav1.TableColumnDefinition {
	name := metav1.ObjectMeta{}.SwaggerDoc()["name"]
	cols := []metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name", Description: name}}
	cols = append(cols, t.kind.Columns...)
	return append(cols,
		metav1.TableColumnDefinition{Name: "Scope", Type: "string", Description: "Where the item comes from: local, parent or global."},
		metav1.TableColumnDefinition{Name: "Source", Type: "string", Description: "The namespace of the source object."},
		metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
		metav1.TableColumnDefinition{Name: "Locked", Type: "string", Priority: 1, Description: "Whether the winning source is locked (implicit.dev/locked): lower scopes can't shadow, exclude or change what it sets."},
		metav1.TableColumnDefinition{Name: "Overlays", Type: "string", Priority: 1, Description: "The sources merged on top of the winning one, in order (implicit.dev/overlays)."},
		metav1.TableColumnDefinition{Name: "Conflict", Type: "string", Priority: 1, Description: "What a lock blocked (implicit.dev/conflict)."},
	)
}

// maxConflictCell bounds the CONFLICT cell; the whole text is the item's
// implicit.dev/conflict annotation.
const maxConflictCell = 80

// ConvertToTable implements rest.TableConvertor for one item or a list.
func (t tableConvertor) ConvertToTable(_ context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	table := &metav1.Table{}
	if to, ok := opts.(*metav1.TableOptions); !ok || !to.NoHeaders {
		table.ColumnDefinitions = t.columns()
	}
	var items []runtime.Object
	if meta.IsListType(obj) {
		var err error
		if items, err = meta.ExtractList(obj); err != nil {
			return nil, fmt.Errorf("table of %s: %w", t.kind.Resource(), err)
		}
		if l, err := meta.ListAccessor(obj); err == nil {
			table.ResourceVersion = l.GetResourceVersion()
			table.Continue = l.GetContinue()
			table.RemainingItemCount = l.GetRemainingItemCount()
		}
	} else {
		items = []runtime.Object{obj}
		if m, err := meta.Accessor(obj); err == nil {
			table.ResourceVersion = m.GetResourceVersion()
		}
	}
	table.Rows = make([]metav1.TableRow, 0, len(items))
	for _, it := range items {
		m, err := meta.Accessor(it)
		if err != nil {
			return nil, fmt.Errorf("table of %s: %w", t.kind.Resource(), err)
		}
		cells := []any{m.GetName()}
		cells = append(cells, t.cells(it)...)
		cells = append(cells, m.GetLabels()[v1alpha1.LabelScope], m.GetLabels()[v1alpha1.LabelSourceNamespace], age(m.GetCreationTimestamp()))
		annotations := m.GetAnnotations()
		cells = append(cells, fmt.Sprint(annotations[v1alpha1.AnnotationLocked] == "true"),
			orNone(annotations[v1alpha1.AnnotationOverlays]), orNone(truncate(annotations[v1alpha1.AnnotationConflict], maxConflictCell)))
		table.Rows = append(table.Rows, metav1.TableRow{Cells: cells, Object: runtime.RawExtension{Object: it}})
	}
	return table, nil
}

func age(ts metav1.Time) string {
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(metav1.Now().Sub(ts.Time))
}

// orNone prints an empty cell as kubectl prints a missing value.
func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// truncate shortens s to at most n runes, marking the cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
