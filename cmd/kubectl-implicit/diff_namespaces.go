package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"k8s.io/cli-runtime/pkg/resource"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// namespaceChange is an applied Namespace whose place in the hierarchy or
// tenancy changes: what its views and its subtree's inherit follows.
type namespaceChange struct {
	name    string
	changes []string // "implicit.dev/parent: pl-a -> pl-b", sorted by key
	// deleted: the namespace is deleted; below are its descendants, which
	// lose what it and its ancestors pass down.
	deleted bool
	below   []string
}

// namespaceDeletion is the change of deleting namespace: its views go, and
// the namespaces below it (as far as the requester may read the hierarchy)
// lose what it and its ancestors pass down.
func namespaceDeletion(ctx context.Context, dyn dynamic.Interface, namespace string) namespaceChange {
	c := namespaceChange{name: namespace, deleted: true}
	below, err := descendants(ctx, dyn, namespace)
	if err != nil {
		c.changes = []string{fmt.Sprintf("the namespaces below it are not known (%v)", err)}
		return c
	}
	c.below = below
	return c
}

// tenancyKeys are the labels and annotations of a namespace that decide
// what its views (and its subtree's) inherit.
var tenancyKeys = []struct {
	key   string
	label bool
}{
	{v1alpha1.LabelParent, true},
	{v1alpha1.LabelInherit, true},
	{v1alpha1.LabelStage, true},
	{v1alpha1.AnnotationExclude, false},
	{v1alpha1.AnnotationExceptions, false},
	{v1alpha1.AnnotationExceptionApprovals, false},
	{v1alpha1.AnnotationExceptionsExpired, false},
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

// previewNamespace asks a Preview of each view served what the Namespace
// as the apply would store it changes in its and its subtree's views (-o
// json and yaml print each; the table those with changes).
func (o *options) previewNamespace(ctx context.Context, dyn dynamic.Interface, edit *appliedEdit) ([]*v1alpha1.Preview, error) {
	disc, err := o.config.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	views, err := disc.ServerResourcesForGroupVersion(v1alpha1.SchemeGroupVersion.String())
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(edit.merged.Object)
	if err != nil {
		return nil, err
	}
	var out []*v1alpha1.Preview
	for _, r := range views.APIResources {
		if strings.Contains(r.Name, "/") || !slices.Contains(r.Categories, "implicit") {
			continue
		}
		req := &v1alpha1.Preview{
			TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Preview"},
			Spec:     v1alpha1.PreviewSpec{Resource: r.Name, Object: &runtime.RawExtension{Raw: raw}},
		}
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(req)
		if err != nil {
			return nil, err
		}
		u, err := dyn.Resource(gvr(v1alpha1.ResourcePreviews)).Namespace(edit.info.Name).Create(ctx, &unstructured.Unstructured{Object: content}, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		p := &v1alpha1.Preview{}
		if err := fromUnstructured(u.Object, p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// isNamespacePreview reports whether p previews a Namespace's change.
func isNamespacePreview(p *v1alpha1.Preview) bool {
	for _, c := range p.Status.Changed {
		if c.Name != "" {
			return true
		}
	}
	if p.Spec.Object == nil {
		return false
	}
	var tm struct{ APIVersion, Kind string }
	return json.Unmarshal(p.Spec.Object.Raw, &tm) == nil && tm.APIVersion == "v1" && tm.Kind == "Namespace"
}

// printNamespacePreview prints the view items a Namespace's change adds,
// removes or changes, namespace by namespace, then their field diffs.
func printNamespacePreview(w io.Writer, p *v1alpha1.Preview) error {
	st := p.Status
	fmt.Fprintf(w, "%s in namespace/%s and its subtree: changes %d item(s) in %d namespace(s) besides %s.\n",
		p.Spec.Resource, st.Name, len(st.Changed), st.Reached, st.Name)
	if st.Hidden > 0 {
		fmt.Fprintf(w, "%d namespace(s) whose view you may not list are left out.\n", st.Hidden)
	}
	if len(st.Changed) == 0 {
		return nil
	}
	t := newTable(w, "NAMESPACE", "NAME", "CHANGE", "BEFORE", "AFTER")
	for _, c := range st.Changed {
		t.row(c.Namespace, c.Name, c.Type, summaryCell(c.Before), summaryCell(c.After))
	}
	if err := t.flush(); err != nil {
		return err
	}
	return printFieldDiffs(w, p)
}

// printNamespaceChanges prints the namespaces whose tenancy changes, in
// the table form only.
func printNamespaceChanges(w io.Writer, output string, changes []namespaceChange) {
	if !isTable(output) {
		return
	}
	for _, c := range changes {
		switch {
		case !c.deleted:
			fmt.Fprintf(w, "namespace/%s: %s: the views of %s and of its subtree inherit from the new lineage.\n",
				c.name, strings.Join(c.changes, ", "), c.name)
		case len(c.below) > 0:
			fmt.Fprintf(w, "namespace/%s: deleted: its views go with it, and %d namespace(s) below it lose what it and its ancestors pass down: %s.\n",
				c.name, len(c.below), strings.Join(c.below, ", "))
		case len(c.changes) > 0:
			fmt.Fprintf(w, "namespace/%s: deleted: its views go with it; %s.\n", c.name, strings.Join(c.changes, ", "))
		default:
			fmt.Fprintf(w, "namespace/%s: deleted: its views go with it; no namespace inherits from it.\n", c.name)
		}
	}
	if len(changes) > 0 {
		fmt.Fprintln(w)
	}
}
