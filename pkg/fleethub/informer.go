package fleethub

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/klog/v2"

	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
)

// crdPoll is how often a hub without the MemberCluster CRD is asked again.
const crdPoll = 30 * time.Second

// Run waits for the MemberCluster CRD to be served on the hub (saying so in
// the log while it isn't: the fan-out warning then counts the hub only),
// then feeds t from an informer of the MemberClusters until ctx is
// cancelled.
func (t *Tracker) Run(ctx context.Context, dc discovery.DiscoveryInterface, dyn dynamic.Interface) {
	gv := fleetv1alpha1.GroupVersionResource.GroupVersion().String()
	logged := false
	err := wait.PollUntilContextCancel(ctx, crdPoll, true, func(context.Context) (bool, error) {
		rl, err := dc.ServerResourcesForGroupVersion(gv)
		if err == nil {
			for _, r := range rl.APIResources {
				if r.Name == fleetv1alpha1.Resource {
					return true, nil
				}
			}
		}
		if !logged {
			klog.InfoS("MemberCluster CRD not served on this hub: the fan-out warning counts this cluster only until it is installed (artifacts/fleet/hub/crd-memberclusters.yaml)",
				"resource", fleetv1alpha1.GroupVersionResource.GroupResource().String(), "err", err)
			logged = true
		}
		return false, nil
	})
	if err != nil {
		return
	}
	klog.InfoS("Reading the fleet's member reports", "resource", fleetv1alpha1.GroupVersionResource.GroupResource().String())
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := f.ForResource(fleetv1alpha1.GroupVersionResource).Informer()
	if _, err := inf.AddEventHandler(t); err != nil {
		klog.ErrorS(err, "Reading the fleet's member reports")
		return
	}
	f.Start(ctx.Done())
	<-ctx.Done()
	f.Shutdown()
}
