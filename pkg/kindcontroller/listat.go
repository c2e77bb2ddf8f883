package kindcontroller

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// exactListPage is how many objects one page of an exact list holds.
const exactListPage = 1000

// exactList lists gvr's objects (in namespace, "" for all) as of an etcd
// revision (resourceVersionMatch=Exact), page by page, for the mux to
// serve a version another replica issued; a call that names a namespace
// lists that namespace's only (a one-namespace resume reads its lineage's).
// A built-in kind's objects come back as its Go type, as its informer's
// do; nil without a client.
func exactList(client dynamic.Interface, gvr schema.GroupVersionResource, namespace string, typed bool) watchmux.ListFunc {
	if client == nil {
		return nil
	}
	return func(ctx context.Context, rv, in string) ([]runtime.Object, error) {
		ns := namespace
		if in != "" {
			ns = in
		}
		var out []runtime.Object
		opts := metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Limit: exactListPage}
		for {
			list, err := client.Resource(gvr).Namespace(ns).List(ctx, opts)
			if err != nil {
				return nil, err
			}
			for i := range list.Items {
				obj, err := asInformerObject(&list.Items[i], typed)
				if err != nil {
					return nil, err
				}
				out = append(out, obj)
			}
			if list.GetContinue() == "" {
				return out, nil
			}
			// A continuation carries the revision itself.
			opts = metav1.ListOptions{Continue: list.GetContinue(), Limit: exactListPage}
		}
	}
}

// asInformerObject converts u to its Go type for a built-in kind.
func asInformerObject(u *unstructured.Unstructured, typed bool) (runtime.Object, error) {
	if !typed {
		return u, nil
	}
	obj, err := scheme.Scheme.New(u.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return nil, err
	}
	// As an informer's typed objects: no kind. A view item copies its
	// source, and one of the source's group would be listed as such.
	obj.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return obj, nil
}
