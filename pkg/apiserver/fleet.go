package apiserver

import (
	"time"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/dynamic"

	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/fleet"
	"github.com/implicit-dev/implicit-apiserver/pkg/sourcefeed"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// MemberConfig makes the server a member of its hub's fleet.
type MemberConfig struct {
	// Name is the member's MemberCluster's name on the hub.
	Name string
	// Client reaches the hub for the registration and the reports
	// (--fleet-report-kubeconfig, else --global-kubeconfig).
	Client dynamic.Interface
	// ReportInterval is how often the report is written.
	ReportInterval time.Duration
}

// startFleet writes the member's reports once the server serves, when it
// is a member of a fleet (its registration is the watch multiplexer's:
// membership.go).
func (c CompletedConfig) startFleet(gs *genericapiserver.GenericAPIServer, mux *watchmux.Mux, authorizer *authz.Authorizer, hub *sourcefeed.HubHealth) error {
	x := c.ExtraConfig
	if x.Hub == nil || x.Hub.Member == nil {
		return nil
	}
	m := x.Hub.Member
	groups := map[string]string{}
	for _, k := range x.Kinds {
		groups[k.Resource()] = k.Source.Group
	}
	reporter := fleet.NewReporter(fleet.ReporterOptions{
		Name: m.Name, Client: m.Client, Mirror: mux, Stale: hub.Stale, Groups: groups,
		// Whether a hub candidate is one here: as the mux marks it, from the
		// registration it is fed (watchmux.Mux.AddMembership).
		AuditDifferences: authorizer.AuditDifferences,
		Interval:         m.ReportInterval,
		Clock:            x.Clock,
	})
	return gs.AddPostStartHook("implicit-fleet-member", func(ctx genericapiserver.PostStartHookContext) error {
		go reporter.Run(ctx)
		return nil
	})
}
