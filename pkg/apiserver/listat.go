package apiserver

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// namespacesAt lists the namespaces as of an etcd revision
// (resourceVersionMatch=Exact), page by page: the mux serves a version
// another replica issued from the sources at its revisions. Namespaces are
// cluster-scoped: the namespace argument is ignored.
func namespacesAt(client kubernetes.Interface) watchmux.ListFunc {
	if client == nil {
		return nil
	}
	return func(ctx context.Context, rv, _ string) ([]runtime.Object, error) {
		var out []runtime.Object
		opts := metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Limit: 1000}
		for {
			list, err := client.CoreV1().Namespaces().List(ctx, opts)
			if err != nil {
				return nil, err
			}
			for i := range list.Items {
				out = append(out, &list.Items[i])
			}
			if list.Continue == "" {
				return out, nil
			}
			opts = metav1.ListOptions{Continue: list.Continue, Limit: 1000}
		}
	}
}
