package registry

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// Cells returns how a table finds an item's values for k's columns: the
// kind's own Cells, or its columns' JSONPaths evaluated as kube-apiserver
// evaluates a CustomResourceDefinition's printer columns (printerColumns).
// The error names a JSONPath that does not parse: such a kind can't be
// served.
func Cells(k kinds.Kind) (func(runtime.Object) []any, error) {
	if k.Cells != nil {
		return k.Cells, nil
	}
	return printerColumns(k)
}
