package main

import (
	"fmt"
	"io"
	"strings"

	"k8s.io/cli-runtime/pkg/resource"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// namespaceChange is an applied Namespace whose place in the hierarchy or
// tenancy changes: what its views and its subtree's inherit follows.
type namespaceChange struct {
	name    string
	changes []string // "implicit.dev/parent: pl-a -> pl-b", sorted by key
}

// tenancyKeys are the labels and annotations of a namespace that decide
// what its views (and its subtree's) inherit.
var tenancyKeys = []struct {
	key   string
	label bool
}{
	{merge.LabelParent, true},
	{merge.LabelInherit, true},
	{merge.LabelStage, true},
	{merge.AnnotationExclude, false},
}

// isNamespace reports whether info is a core Namespace.
func isNamespace(info *resource.Info) bool {
	gvk := info.Mapping.GroupVersionKind
	return gvk.Group == "" && gvk.Kind == "Namespace"
}

// tenancyChange is the change of edit's namespace's tenancy keys, if any.
func tenancyChange(edit *appliedEdit) (namespaceChange, bool) {
	c := namespaceChange{name: edit.info.Name}
	value := func(u interface {
		GetLabels() map[string]string
		GetAnnotations() map[string]string
	}, key string, label bool,
	) (string, bool) {
		m := u.GetAnnotations()
		if label {
			m = u.GetLabels()
		}
		v, ok := m[key]
		return v, ok
	}
	for _, k := range tenancyKeys {
		before, had := "", false
		if edit.live != nil {
			before, had = value(edit.live, k.key, k.label)
		}
		after, has := "", false
		if edit.merged != nil {
			after, has = value(edit.merged, k.key, k.label)
		}
		if before == after && had == has {
			continue
		}
		c.changes = append(c.changes, fmt.Sprintf("%s: %s -> %s", k.key, shown(before, had), shown(after, has)))
	}
	return c, len(c.changes) > 0
}

func shown(v string, ok bool) string {
	if !ok {
		return "(none)"
	}
	return fmt.Sprintf("%q", v)
}

// printNamespaceChanges prints the namespaces whose tenancy changes, in
// the table form only.
func printNamespaceChanges(w io.Writer, output string, changes []namespaceChange) {
	if !isTable(output) {
		return
	}
	for _, c := range changes {
		fmt.Fprintf(w, "namespace/%s: %s: the views of %s and of its subtree inherit from the new lineage.\n",
			c.name, strings.Join(c.changes, ", "), c.name)
	}
	if len(changes) > 0 {
		fmt.Fprintln(w)
	}
}
