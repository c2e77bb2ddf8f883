package sourcefeed

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// NamespacesAt lists the namespaces as of an etcd revision
// (resourceVersionMatch=Exact), page by page: the watch multiplexer's
// namespace list (watchmux.ListFunc), with which it serves a version another
// replica issued from the sources at its revisions. Namespaces are
// cluster-scoped: the namespace argument is ignored. Nil without a client.
func NamespacesAt(client kubernetes.Interface) func(ctx context.Context, rv, namespace string) ([]runtime.Object, error) {
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
