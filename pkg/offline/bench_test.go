package offline_test

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/internal/offlinegen"
	"github.com/implicit-dev/implicit-apiserver/pkg/offline"
)

// BenchmarkTestCommand times what kubectl implicit test does on a
// repository of 1,000 namespaces and 10,000 sources (plain YAML, 100
// objects a file) with a test of 1,000 checks: read, decode, build the
// world, run the checks. docs/benchmarks.md records the figure:
//
//	GOMAXPROCS=1 go test -run - -bench TestCommand -benchtime 5x ./pkg/offline/
func BenchmarkTestCommand(b *testing.B) {
	dir := b.TempDir()
	r := rand.New(rand.NewSource(1))
	w := offlinegen.Generate(r, offlinegen.Config{Namespaces: 1000, Sources: 10000, Names: 50})
	if err := w.WriteDir(dir, 100); err != nil {
		b.Fatal(err)
	}
	if err := offlinegen.WriteFile(filepath.Join(dir, "tests", "test.yaml"), benchTest(w)); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		files, err := offline.ReadDir(dir)
		if err != nil {
			b.Fatal(err)
		}
		objs, err := offline.Decode(files)
		if err != nil {
			b.Fatal(err)
		}
		world, err := offline.Build(objs, offline.Options{})
		if err != nil {
			b.Fatal(err)
		}
		results, err := world.RunTests(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if len(results) != 1000 {
			b.Fatalf("%d results, want 1000", len(results))
		}
	}
}

// benchTest checks one view per namespace (its RoleBindings lack a name
// none has): 1,000 views merged.
func benchTest(w offlinegen.World) *unstructured.Unstructured {
	var views []any
	for _, ns := range w.Namespaces {
		views = append(views, map[string]any{"namespace": ns.GetName(), "resource": "rolebindings", "absent": []any{"no-such-item"}})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": offline.TestAPIVersion, "kind": offline.KindTest,
		"metadata": map[string]any{"name": fmt.Sprintf("bench-%d", len(w.Namespaces))},
		"views":    views,
	}}
}
