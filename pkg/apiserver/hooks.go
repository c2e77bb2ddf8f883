package apiserver

import (
	"fmt"
	"net/http"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/implicit-dev/implicit-apiserver/pkg/hierarchy"
	"github.com/implicit-dev/implicit-apiserver/pkg/kindcontroller"
	"github.com/implicit-dev/implicit-apiserver/pkg/servedgroup"
	"github.com/implicit-dev/implicit-apiserver/pkg/sourcefeed"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// addHooks starts what runs beside the server once it serves (the kind
// controller, the hub's informers and probes, the mux, the hierarchy
// reporter) and ties readiness to the kinds being looked up and every
// source being read.
func (c CompletedConfig) addHooks(gs *genericapiserver.GenericAPIServer, mux *watchmux.Mux, ctl *kindcontroller.Controller, group *servedgroup.Group, hub *sourcefeed.HubHealth, trackers []*sourcefeed.Tracker) error {
	x := c.ExtraConfig
	if err := gs.AddPostStartHook("implicit-source-progress", func(ctx genericapiserver.PostStartHookContext) error {
		go sourcefeed.RunProgress(ctx, trackers, x.sourceProgress())
		return nil
	}); err != nil {
		return err
	}
	if err := gs.AddPostStartHook("implicit-served-kinds", func(ctx genericapiserver.PostStartHookContext) error {
		go ctl.Run(ctx)
		return nil
	}); err != nil {
		return err
	}
	if err := c.addReadyz(gs, mux, ctl, group, hub); err != nil {
		return err
	}
	if x.Hub != nil {
		if err := gs.AddPostStartHook("implicit-hub-informers", func(ctx genericapiserver.PostStartHookContext) error {
			x.Hub.Informers.Start(ctx.Done())
			go hub.Run(ctx)
			go func() {
				<-ctx.Done()
				x.Hub.Informers.Shutdown()
			}()
			return nil
		}); err != nil {
			return err
		}
	}
	if err := gs.AddPostStartHook("implicit-watch-multiplexer", func(ctx genericapiserver.PostStartHookContext) error {
		go mux.Run(ctx)
		return nil
	}); err != nil {
		return err
	}

	if err := c.startExceptionWriter(gs, mux); err != nil {
		return err
	}
	reporter, err := hierarchy.NewReporter(x.Policy, x.Informers.Core().V1().Namespaces())
	if err != nil {
		return err
	}
	return gs.AddPostStartHook("implicit-hierarchy-reporter", func(ctx genericapiserver.PostStartHookContext) error {
		var recorder record.EventRecorder
		if x.Client != nil {
			recorder = newRecorder(ctx, x.Client)
		}
		go reporter.Run(ctx, recorder)
		return nil
	})
}

// addReadyz ties readiness to the kinds being looked up in the host and
// every source being read.
func (c CompletedConfig) addReadyz(gs *genericapiserver.GenericAPIServer, mux *watchmux.Mux, ctl *kindcontroller.Controller, group *servedgroup.Group, hub *sourcefeed.HubHealth) error {
	x := c.ExtraConfig
	if err := gs.AddReadyzChecks(healthz.NamedCheck("configured-kinds", func(*http.Request) error {
		if ctl.HasChecked() && group.Serving() {
			return nil
		}
		return fmt.Errorf("the configured kinds have not been looked up in the host cluster yet")
	})); err != nil {
		return err
	}

	// Ready only once every source has been listed: before that a view would
	// silently miss inherited items.
	if err := gs.AddReadyzChecks(healthz.NamedCheck("sources-synced", func(*http.Request) error {
		if mux.HasSynced() {
			return nil
		}
		if hub != nil {
			if err := hub.Unreached(); err != nil {
				return fmt.Errorf("the global sources on hub cluster %q have never been read: %v", x.Hub.Name, err)
			}
		}
		return fmt.Errorf("the namespaces and source objects have not all been read yet")
	})); err != nil {
		return err
	}
	return nil
}

// discoveryOf returns the host's discovery client; nil without a client.
func discoveryOf(c kubernetes.Interface) discovery.DiscoveryInterface {
	if c == nil {
		return nil
	}
	return c.Discovery()
}
