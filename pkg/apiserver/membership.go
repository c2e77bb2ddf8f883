package apiserver

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/tools/cache"

	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/sourcefeed"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// addMembership feeds mux the member cluster's registration on its hub
// (its MemberCluster, which the hub's admin made and labelled), which
// decides the hub candidates with implicit.dev/canary-clusters that exist
// here. Only that one object is listed and watched (a field selector on its
// name, which RBAC's resourceNames can limit), through a Tracker, so that
// its changes have revisions as the sources' do; the server is ready once
// it has been read (a hub without the MemberCluster CRD keeps it unready,
// the reflector's errors saying why). Nothing to do for a server that is
// no member of a fleet.
func (c CompletedConfig) addMembership(gs *genericapiserver.GenericAPIServer, mux *watchmux.Mux) error {
	x := c.ExtraConfig
	if x.Hub == nil || x.Hub.Member == nil {
		return nil
	}
	client := x.Hub.Dynamic.Resource(fleetv1alpha1.GroupVersionResource)
	byName := fields.OneTermEqualSelector("metadata.name", x.Hub.Member.Name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			return client.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return client.Watch(ctx, o)
		},
	}
	tr := sourcefeed.New(fleetv1alpha1.Resource, cache.ToListWatcherWithWatchListSemantics(lw, x.Hub.Dynamic))
	informer := cache.NewSharedIndexInformer(tr.ListerWatcher(), &unstructured.Unstructured{}, 0, cache.Indexers{})
	list := func(ctx context.Context, rv, _ string) ([]runtime.Object, error) {
		l, err := client.List(ctx, metav1.ListOptions{FieldSelector: byName, ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
		if err != nil {
			return nil, err
		}
		out := make([]runtime.Object, 0, len(l.Items))
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
		return out, nil
	}
	if err := mux.AddMembership(x.Hub.Member.Name, x.Hub.Name, informer, tr, list); err != nil {
		return err
	}
	return gs.AddPostStartHook("implicit-fleet-membership", func(ctx genericapiserver.PostStartHookContext) error {
		go informer.RunWithContext(ctx)
		go sourcefeed.RunProgress(ctx, []*sourcefeed.Tracker{tr}, x.sourceProgress())
		return nil
	})
}
