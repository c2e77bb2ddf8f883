package kindcontroller

import (
	"fmt"

	"k8s.io/client-go/tools/cache"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
	"github.com/implicit-dev/implicit-apiserver/pkg/sourcefeed"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// start is the one path of every kind: it sets the kind's merge options,
// feeds its informers (local, and the hub's) to the mux and makes its view
// and the view's storage. A built-in kind (k.Typed) is known to the mux from
// the start, synced with the mux and served at once; o nil leaves its merge
// options as they are. Any other kind, completed with the host's names, is
// added to the mux pending, and served once the registrations returned have
// synced (add).
func (c *Controller) start(k kinds.Kind, o *merge.Options) ([]cache.InformerSynced, error) {
	resource := k.Resource()
	pending := !k.Typed()
	view := views.New(v1alpha1.SchemeGroupVersion.WithResource(resource).GroupResource(), c.mux)
	var src sources
	if pending {
		if err := c.mux.AddResource(resource, *o); err != nil {
			return nil, err
		}
		c.objects.Add(resource, k.New)
		view.WithKind(v1alpha1.SchemeGroupVersion.WithKind(k.Kind))
		st := c.factory.For(k.Source)
		src.local, src.localStream = st.Informer, st.Tracker
		if c.hubFactory != nil {
			st := c.hubFactory.For(k.Source)
			src.hub, src.hubStream = st.Informer, st.Tracker
		}
	} else {
		if o != nil {
			c.mux.SetMergeOptions(resource, *o)
		}
		gi, err := c.informers.ForResource(k.Source)
		if err != nil {
			return nil, fmt.Errorf("no informer for %s: %w", k.Source, err)
		}
		src.local = gi.Informer()
		// The factory hands out a typed wrapper of its informer, a new one
		// each time: a kind tracked when the factory made it is fed from
		// the shared informer itself.
		if st, ok := c.streams[k.Source]; ok {
			src.local, src.localStream = st.Informer, st.Tracker
		}
		if c.hub != nil {
			hi, err := c.hub.Informers.ForResource(k.Source)
			if err != nil {
				return nil, fmt.Errorf("no informer for %s on the hub: %w", k.Source, err)
			}
			src.hub = hi.Informer()
			if st, ok := c.hub.Streams[k.Source]; ok {
				src.hub, src.hubStream = st.Informer, st.Tracker
			}
		}
	}
	var hubName string
	if c.hub != nil {
		hubName = c.hub.Name
	}
	src.localList = exactList(c.dyn, k.Source, "", !pending)
	if src.hub != nil && c.hub.Dynamic != nil {
		src.hubList = exactList(c.hub.Dynamic, k.Source, c.hub.GlobalNamespace, !pending)
	}
	syncs, err := feed(c.mux, resource, hubName, src, pending)
	if err != nil {
		return nil, err
	}
	if src.hub != nil {
		view.WithStaleness(c.hub.Staleness)
	}
	c.mu.Lock()
	c.kinds[resource] = &servedKind{kind: k, view: view, storage: newStorage(k, view), synced: !pending}
	c.mu.Unlock()
	return syncs, nil
}

// newStorage is the REST storage of a kind's view.
func newStorage(k kinds.Kind, view *views.View) *registry.Storage {
	return registry.NewStorage(v1alpha1.GroupName, k, view)
}

// sources are the informers a kind's sources are read from: the local
// cluster's and, with a hub, the hub's global namespace's.
type sources struct {
	local, hub cache.SharedIndexInformer
	// localList and hubList list them as of an etcd revision.
	localList, hubList watchmux.ListFunc
	// localStream and hubStream, when set, are the Trackers they list and
	// watch through.
	localStream, hubStream *sourcefeed.Tracker
}

// feed hands a kind's informers to the mux; it is the only caller of the
// mux's AddSource. A kind the mux knew from the start is waited for by the
// mux's own Run; a pending one is waited for through the registrations'
// HasSynced returned.
func feed(mux *watchmux.Mux, resource, hub string, src sources, pending bool) ([]cache.InformerSynced, error) {
	var syncs []cache.InformerSynced
	add := func(s watchmux.Source) error {
		reg, err := mux.AddSource(resource, s)
		if err == nil && pending {
			syncs = append(syncs, reg.HasSynced)
		}
		return err
	}
	if err := add(watchmux.Source{Informer: src.local, List: src.localList, Stream: src.localStream}); err != nil {
		return nil, err
	}
	if src.hub != nil {
		if err := add(watchmux.Source{Informer: src.hub, Cluster: hub, List: src.hubList, Stream: src.hubStream}); err != nil {
			return nil, err
		}
	}
	return syncs, nil
}
