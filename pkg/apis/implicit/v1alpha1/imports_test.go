package v1alpha1_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsNothingThatServes keeps this package a description: the kubectl
// plugin and every serving package import it for its types and names, so it
// may import the standard library, apimachinery and kube-openapi only, never
// this module's serving packages nor k8s.io/apiserver.
func TestImportsNothingThatServes(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := []string{"k8s.io/apimachinery/", "k8s.io/kube-openapi/"}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			std := !strings.Contains(strings.SplitN(path, "/", 2)[0], ".")
			ok := std
			for _, prefix := range allowed {
				ok = ok || strings.HasPrefix(path, prefix)
			}
			if !ok {
				t.Errorf("%s imports %q: an API package imports only the standard library, apimachinery and kube-openapi", name, path)
			}
		}
	}
}
