package admission

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
)

// Config is what the guards are built from; only Mirror and Authorizer are
// required.
type Config struct {
	// Mirror is what the guards read of the sources: MirrorOf(whatif.New(…)).
	Mirror Mirror
	// Authorizer asks the host cluster whether the requester may.
	Authorizer Authorizer
	// Served are the source group/resources guarded from the start (Serve
	// adds the kinds served later).
	Served []schema.GroupResource
	// GlobalNamespaces are the namespaces of global sources: the policy's,
	// and those of kinds configured with their own; their sources' changes
	// are inherited ones.
	GlobalNamespaces []string
	// Namespaces are the host cluster's namespaces, to record and check a
	// parent's uid. The parent is read from kube-apiserver, not from the
	// informers: a parent created a moment before its first child must be
	// found, and a parent deleted and created again must be told apart.
	// Without it the parent-uid webhook and the parent guard can't decide a
	// new parent (503: the failure policy applies).
	Namespaces NamespaceGetter
	// TrustParentUIDFrom are the users whose implicit.dev/parent-uid
	// annotation is taken as they write it: the server's own identity, for
	// a controller that records the uid of parents labelled before the
	// webhook existed. The annotation is still removed with the parent
	// label.
	TrustParentUIDFrom []string
	// ServerIdentity is the server's own user when known at start
	// (SetServerIdentity sets it when learned later).
	ServerIdentity string
	// Materialized are the view resources configured with delivery:
	// Materialize: the fan-out warning of their sources counts the writes
	// of copies a change makes.
	Materialized []string
	// Hub, when set, answers the access questions about the sources of the
	// hub cluster named HubCluster (an approval of an exception of a hub
	// item is decided by the hub's RBAC: its sources' namespaces are the
	// hub's, whatever the member's RBAC says of namespaces of that name).
	Hub        Authorizer
	HubCluster string
	// Fleet, on a hub (--fleet-hub), is its members' reports: the fan-out
	// warning of a global source's change counts their namespaces too.
	Fleet FleetIndex
	// Ledger, when set, makes the guards' decisions take turns on it with
	// the other replicas' (shared.go). Without one, a replica decides with
	// its own memory only: right for one replica.
	Ledger Ledger
	// Clock times what the guards remember and tells an exception's end
	// from the future (default the real clock; tests use a fake one).
	Clock clock.PassiveClock
	// MirrorWait is how long a namespace deletion waits for the mirror to
	// show the namespace it deletes, then answers 503 (0: the default, 2 s;
	// negative: not at all).
	MirrorWait time.Duration
}

// NewGuards returns the guards configured by c.
func NewGuards(c Config) *Guards {
	clk := c.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	g := &Guards{
		mirror: c.Mirror, authz: c.Authorizer, hub: c.Hub, hubCluster: c.HubCluster, fleet: c.Fleet,
		served: map[schema.GroupResource]string{}, globals: map[string]bool{},
		namespaces:   c.Namespaces,
		trusted:      map[string]bool{},
		identity:     c.ServerIdentity,
		materialized: map[string]bool{},
		hierarchy:    assumptions{mirror: c.Mirror.Namespaces, clock: clk, ttl: assumeFor, byName: map[string]assumption{}},
		recent:       newRecent(clk),
		mirrorWait:   c.MirrorWait,
		clock:        clk,
	}
	g.recent.shown = g.sourceShown
	if g.mirrorWait == 0 {
		g.mirrorWait = defaultMirrorWait
	}
	if c.Ledger != nil {
		g.shared = &sharedTurns{ledger: c.Ledger}
	}
	for _, gr := range c.Served {
		g.served[gr] = gr.Resource
	}
	for _, ns := range c.GlobalNamespaces {
		g.globals[ns] = true
	}
	for _, u := range c.TrustParentUIDFrom {
		g.trusted[u] = true
	}
	for _, r := range c.Materialized {
		g.materialized[r] = true
	}
	return g
}
