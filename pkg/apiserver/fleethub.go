package apiserver

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/fleethub"
)

// fleetMetricsPeriod is how often the members' gauges are recomputed.
const fleetMetricsPeriod = 10 * time.Second

// startFleetHub, with --fleet-hub, reads the members' reports once the
// server has started (tolerating the CRD's absence) and keeps their gauges;
// it returns what the fan-out guard asks of them (nil without the flag).
func (c CompletedConfig) startFleetHub(gs *genericapiserver.GenericAPIServer, index *whatif.Index) (*fleethub.Tracker, error) {
	x := c.ExtraConfig
	if !x.FleetHub || x.Client == nil || x.Dynamic == nil {
		return nil, nil
	}
	t := fleethub.NewTracker(fleethub.Config{Clock: x.Clock})
	hub := hubSources{index: index, namespace: x.Policy.GlobalNamespace}
	return t, gs.AddPostStartHook("implicit-fleet-hub", func(ctx genericapiserver.PostStartHookContext) error {
		go t.Run(ctx, x.Client.Discovery(), x.Dynamic)
		go t.RunMetrics(ctx, hub, fleetMetricsPeriod)
		return nil
	})
}

// hubSources answers fleethub.HubSources from the mirror: the hub's global
// sources are this cluster's global namespace's.
type hubSources struct {
	index     *whatif.Index
	namespace string
}

// SourceResourceVersion implements fleethub.HubSources.
func (h hubSources) SourceResourceVersion(resource, name string) (string, bool) {
	gr := schema.ParseGroupResource(resource)
	obj, found, err := h.index.SourceObject(gr.Resource, h.namespace, name)
	if err != nil || !found {
		return "", false
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", false
	}
	return m.GetResourceVersion(), true
}
