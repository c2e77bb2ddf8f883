package registry

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// tableConvertor prints view items: NAME, the kind's own columns, SCOPE,
// SOURCE (the winning source's namespace) and AGE.
type tableConvertor struct {
	kind Kind
}

func (t tableConvertor) columns() []metav1.TableColumnDefinition {
	name := metav1.ObjectMeta{}.SwaggerDoc()["name"]
	cols := []metav1.TableColumnDefinition{{Name: "Name", Type: "string", Format: "name", Description: name}}
	cols = append(cols, t.kind.Columns...)
	return append(cols,
		metav1.TableColumnDefinition{Name: "Scope", Type: "string", Description: "Where the item comes from: local, parent or global."},
		metav1.TableColumnDefinition{Name: "Source", Type: "string", Description: "The namespace of the source object."},
		metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	)
}

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
		cells = append(cells, t.kind.Cells(it)...)
		cells = append(cells, m.GetLabels()[merge.LabelScope], m.GetLabels()[merge.LabelSourceNamespace], age(m.GetCreationTimestamp()))
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
