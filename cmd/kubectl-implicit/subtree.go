package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// readableViews are the view items of one name that reach and rollout
// status read: every namespace's, for who may list the view at the
// cluster scope (an org admin); otherwise, for a parent admin, those of the
// source namespace's subtree, the only namespaces a parent source reaches.
type readableViews struct {
	items []unstructured.Unstructured
	// subtree is set when the answer was read namespace by namespace in
	// the source's subtree; hidden counts those the requester may not read.
	subtree []string
	hidden  int
}

// viewItemsReadable lists the view items named name that the requester may
// read, for a source in namespace source.
func viewItemsReadable(ctx context.Context, dyn dynamic.Interface, resource, source, name string) (*readableViews, error) {
	items, err := viewItems(ctx, dyn, resource, "", name)
	if err == nil {
		return &readableViews{items: items}, nil
	}
	if !apierrors.IsForbidden(err) {
		return nil, err
	}
	forbidden := fmt.Errorf("%w\n(this question lists the view %s.%s in every namespace: an org admin's question, which needs list on %s.%s at the cluster scope, a ClusterRole bound by a ClusterRoleBinding; a parent admin is answered within the source namespace's subtree when it may read the hierarchy there)",
		err, resource, v1alpha1.GroupName, resource, v1alpha1.GroupName)
	subtree, err := descendants(ctx, dyn, source)
	if err != nil || len(subtree) == 0 {
		return nil, forbidden
	}
	out := &readableViews{subtree: subtree}
	for _, ns := range append([]string{source}, subtree...) {
		in, err := viewItems(ctx, dyn, resource, ns, name)
		switch {
		case apierrors.IsForbidden(err):
			out.hidden++
		case err != nil:
			return nil, err
		}
		out.items = append(out.items, in...)
	}
	return out, nil
}

// descendants walks the hierarchy down from namespace: its descendants,
// sorted.
func descendants(ctx context.Context, dyn dynamic.Interface, namespace string) ([]string, error) {
	var out []string
	queue := []string{namespace}
	seen := map[string]bool{namespace: true}
	for len(queue) > 0 {
		ns := queue[0]
		queue = queue[1:]
		u, err := dyn.Resource(gvr(v1alpha1.ResourceHierarchies)).Namespace(ns).Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			if ns == namespace {
				return nil, err
			}
			continue // a child whose hierarchy the requester may not read
		}
		h := &v1alpha1.Hierarchy{}
		if err := fromUnstructured(u.Object, h); err != nil {
			return nil, err
		}
		for _, c := range h.Status.Children {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// note says, on a table's standard output, where the answer was read.
func (v *readableViews) note(w io.Writer, source string) {
	if v.subtree == nil {
		return
	}
	fmt.Fprintf(w, "(read within %s's subtree, %d namespace(s): you may not list the view in every namespace", source, len(v.subtree))
	if v.hidden > 0 {
		fmt.Fprintf(w, "; %d of them you may not read", v.hidden)
	}
	fmt.Fprintln(w, ")")
}

// viewItems lists the view items named name in namespace ("": every namespace).
func viewItems(ctx context.Context, dyn dynamic.Interface, resource, namespace, name string) ([]unstructured.Unstructured, error) {
	list, err := dyn.Resource(gvr(resource)).Namespace(namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list.Items, func(it unstructured.Unstructured) bool { return it.GetName() != name }), nil
}
