package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/utils/clock"

	"github.com/implicit-dev/implicit-apiserver/pkg/accessreview"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/h2serve"
	"github.com/implicit-dev/implicit-apiserver/pkg/kindcontroller"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/materialize"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/servedgroup"
	"github.com/implicit-dev/implicit-apiserver/pkg/sourcefeed"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
	"github.com/implicit-dev/implicit-apiserver/pkg/webhook"
	"github.com/implicit-dev/implicit-apiserver/pkg/wirehold"
)

// ExtraConfig is implicit-apiserver's own configuration.
type ExtraConfig struct {
	// Kinds are the served kinds: the built-in ones (typed) are served from
	// the start, the others from unstructured objects once the host serves
	// them.
	Kinds []kinds.Kind
	// HostSchemas are the host's OpenAPI schemas of the built-in Kinds.
	HostSchemas servedgroup.HostSchemas
	// Namer names OpenAPI definitions (the scheme's namer).
	Namer servedgroup.DefinitionNamer
	// Overlayer builds a kind's overlayer from its schema; nil: no overlays.
	Overlayer kindcontroller.NewOverlayer
	// Dynamic reaches the host cluster for the kinds that are not built in.
	Dynamic dynamic.Interface
	// KindPollInterval is how often the host is asked about the kinds that
	// are not built in (default 3s).
	KindPollInterval time.Duration
	// Clock drives the kind polls and the hub's health probes (default the
	// real clock).
	Clock clock.WithTicker
	// Policy says which namespace is global and which are not tenants.
	Policy merge.Policy
	// Scheme and Codecs hold the view types (see servedgroup.NewScheme).
	Scheme *runtime.Scheme
	Codecs serializer.CodecFactory
	// Client and Informers reach the host cluster: namespaces and sources.
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	// AccessReviews asks the guards' SubjectAccessReviews, on a client of
	// its own without a rate limit of its own: AccessReviewOptions sets the
	// rate, shared fairly between requesters, the cache and the cap per
	// admission review (pkg/accessreview). Nil: Client's.
	AccessReviews       authorizationclient.SubjectAccessReviewInterface
	AccessReviewOptions accessreview.Options
	// GuardLedger is the record the replicas' guards take turns on (a
	// Lease in the server's namespace), so that replicas decide as one
	// would. Nil: each replica decides with its own memory alone.
	GuardLedger admission.Ledger
	// Watch tunes the watch multiplexer.
	Watch watchmux.Options
	// SourceProgress is how often each tracked source is read for progress
	// and its informer's watch renewed; 0 means sourcefeed.DefaultProgress.
	SourceProgress time.Duration
	// HTTP2WriteScheduler picks who serves the secure port: "random" (this
	// server's own http.Server with x/net's random write scheduler, which
	// skips idle streams; pkg/h2serve) or "k8s" (k8s.io/apiserver's own
	// serving, x/net's round-robin scheduler). Empty: "k8s".
	HTTP2WriteScheduler string
	// WebhookConfiguration names the ValidatingWebhookConfiguration whose
	// match conditions are kept current; "" for none.
	WebhookConfiguration string
	// Hub, when set, is the cluster the global sources are read from: its
	// client, informers restricted to the global namespace, and its name.
	Hub *HubConfig
	// FleetHub: this cluster's global namespace is a fleet's hub; its
	// members' reports (MemberClusters) are read, counted in the fan-out
	// warning and exported as metrics (pkg/fleethub).
	FleetHub bool
	// WebhookCallers may call the webhook endpoints (/authorize and
	// /admission/*); AnonymousWebhooks opens the admission ones to anyone.
	WebhookCallers    webhook.Callers
	AnonymousWebhooks bool
	// Materialize writes the views of the Kinds delivered as real objects
	// (pkg/materialize).
	Materialize MaterializeConfig
	// ExceptionWarningWindow is how long before an exception's end it is
	// warned of (pkg/exceptions; default exceptions.DefaultWarningWindow).
	ExceptionWarningWindow time.Duration
	// ExceptionsClient writes the expiry marks, on a connection of its own;
	// nil: Client.
	ExceptionsClient kubernetes.Interface
}

// MaterializeConfig configures the materializer.
type MaterializeConfig struct {
	// Dynamic writes the copies, with its own rate limit and connection.
	Dynamic dynamic.Interface
	// Protobuf, when set, reads and writes the built-in kinds' copies in
	// protobuf on Dynamic's connection and rate limit.
	Protobuf *materialize.Protobuf
	// Workers write copies concurrently (0: materialize.DefaultWorkers).
	Workers int
	// LeaseNamespace and LeaseName name the leader election's Lease; no
	// namespace: no election.
	LeaseNamespace, LeaseName string
	// LeaseClient renews the Lease, on a connection and rate limit of its
	// own, so that no other traffic delays a renewal; nil: ExtraConfig's
	// Client.
	LeaseClient kubernetes.Interface
}

// HubConfig reaches the hub cluster of the global sources.
type HubConfig struct {
	Name      string
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	// Dynamic reads the configured kinds' global sources on the hub.
	Dynamic dynamic.Interface
	// Member, when set, makes the server a member of the hub's fleet: its
	// registration (membership.go: which hub candidates with
	// implicit.dev/canary-clusters exist here) and its reports (fleet.go).
	Member *MemberConfig
}

// Config is the generic API server's configuration plus ExtraConfig.
type Config struct {
	GenericConfig *genericapiserver.RecommendedConfig
	ExtraConfig   ExtraConfig
}

type completedConfig struct {
	GenericConfig genericapiserver.CompletedConfig
	ExtraConfig   *ExtraConfig
}

// CompletedConfig is a Config with defaults filled in; only Complete makes one.
type CompletedConfig struct {
	*completedConfig
}

// Complete fills in defaults.
func (c *Config) Complete() CompletedConfig {
	if c.ExtraConfig.KindPollInterval <= 0 {
		c.ExtraConfig.KindPollInterval = 3 * time.Second
	}
	if c.ExtraConfig.Clock == nil {
		c.ExtraConfig.Clock = clock.RealClock{}
	}
	return CompletedConfig{&completedConfig{
		GenericConfig: c.GenericConfig.Complete(),
		ExtraConfig:   &c.ExtraConfig,
	}}
}

// Server is a running implicit-apiserver.
type Server struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
}

// New wires sources, views and storage into a GenericAPIServer.
func (c CompletedConfig) New() (*Server, error) {
	registerMetrics()
	x := c.ExtraConfig
	typed := kinds.Typed(x.Kinds)
	objects := views.NewObjects(kinds.NewObjects(typed), 0)
	watchOpts := x.Watch
	if watchOpts.PastStates == nil {
		turns, ok := x.Clock.(clock.WithDelayedExecution)
		if !ok {
			turns = clock.RealClock{}
		}
		watchOpts.PastStates = watchmux.FairPastStates(turns)
	}
	mux := watchmux.New(x.Policy, kinds.Resources(typed), objects, watchOpts)
	var hub *sourcefeed.HubHealth
	if x.Hub != nil {
		hub = sourcefeed.NewHubHealth(x.Hub.Name, x.Hub.Client, x.Clock)
		objects.WithStaleness(hub.Stale)
	}
	// Before anything asks the factories for these informers: they list
	// and watch through Trackers, so versions name complete states.
	local := sourcefeed.TrackInformers(x.Informers, x.Client, "", x.sourceProgress())
	var hubTracked sourcefeed.Tracked
	if x.Hub != nil {
		hubTracked = sourcefeed.TrackInformers(x.Hub.Informers, x.Hub.Client, x.Policy.GlobalNamespace, x.sourceProgress())
	}
	if local.Namespaces != nil {
		if err := mux.AddNamespaceStream(local.Namespaces.Informer, local.Namespaces.Tracker); err != nil {
			return nil, err
		}
	} else if err := mux.AddNamespaceInformer(x.Informers.Core().V1().Namespaces().Informer()); err != nil {
		return nil, err
	}
	mux.SetNamespaceList(sourcefeed.NamespacesAt(x.Client))

	group := servedgroup.New(servedgroup.Config{
		Scheme:            x.Scheme,
		Codecs:            x.Codecs,
		MinRequestTimeout: time.Duration(c.GenericConfig.MinRequestTimeout) * time.Second,
		HostSchemas:       x.HostSchemas,
		OpenAPIV2:         c.GenericConfig.OpenAPIConfig,
		OpenAPIV3:         c.GenericConfig.OpenAPIV3Config,
		Namer:             x.Namer,
	})
	// A connection's watch events share write calls (pkg/wirehold).
	wireClock, _ := x.Clock.(clock.WithDelayedExecution)
	wire := wirehold.New(wireClock, wirehold.DefaultMaxHold)
	if ss := c.GenericConfig.SecureServing; ss != nil && ss.Listener != nil {
		ss.Listener = wire.Listener(ss.Listener)
	}
	c.GenericConfig.BuildHandlerChainFunc = func(h http.Handler, gc *genericapiserver.Config) http.Handler {
		return genericapiserver.DefaultBuildHandlerChain(servedgroup.RevalidateOpenAPI(watchmux.ConnectionFilter(wire.Filter(group.ReadOnly(h)))), gc)
	}
	admissionCallers, err := c.webhookCallers()
	if err != nil {
		return nil, err
	}
	gs, err := c.GenericConfig.New("implicit-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	if err := parkSecureServing(gs, x.HTTP2WriteScheduler); err != nil {
		return nil, err
	}
	// The authorization webhook's decisions, which the rules reviews list.
	authorizer, err := c.newAuthorizer(mux)
	if err != nil {
		return nil, err
	}
	// The views, and the answers beside them, authorized like them.
	policies, err := c.admissionPolicies(gs)
	if err != nil {
		return nil, err
	}
	group.Install(gs, questions(mux, authorizer, policies, gs, group))

	// The admission guards and the authorization webhook, on their own
	// paths of the secure port.
	guards, err := c.installGuards(gs, mux, group, admissionCallers)
	if err != nil {
		return nil, err
	}
	c.installAuthorizer(gs, authorizer)
	if err := c.startAudit(gs, authorizer); err != nil {
		return nil, err
	}
	if err := c.startFleet(gs, mux, authorizer, hub); err != nil {
		return nil, err
	}

	// Every served kind, built in or found on the host later.
	ctl, err := c.newKindController(mux, objects, group, hub, guards.Serve, local, hubTracked)
	if err != nil {
		return nil, err
	}
	if err := c.addMembership(gs, mux); err != nil {
		return nil, err
	}
	if err := c.addHooks(gs, mux, ctl, group, hub, append(local.Trackers(), hubTracked.Trackers()...)); err != nil {
		return nil, err
	}
	return &Server{GenericAPIServer: gs}, nil
}

// parkSecureServing serves gs's secure port with pkg/h2serve's server
// when scheduler is "random"; "k8s" or empty leaves it to k8s.io/apiserver.
func parkSecureServing(gs *genericapiserver.GenericAPIServer, scheduler string) error {
	switch scheduler {
	case "", HTTP2SchedulerK8s:
		return nil
	case HTTP2SchedulerRandom:
	default:
		return fmt.Errorf("unknown HTTP/2 write scheduler %q", scheduler)
	}
	info := gs.SecureServingInfo
	if info == nil || info.Listener == nil || info.DisableHTTP2 {
		return nil
	}
	timeout := gs.ShutdownTimeout
	if gs.ShutdownSendRetryAfter {
		timeout = 2 * time.Second // as RunWithContext
	}
	_, err := h2serve.Park(info, gs.Handler, h2serve.Options{
		NewWriteScheduler: h2serve.RandomWriteScheduler,
		ShutdownTimeout:   timeout,
	})
	return err
}

// The values of ExtraConfig.HTTP2WriteScheduler.
const (
	HTTP2SchedulerRandom = "random"
	HTTP2SchedulerK8s    = "k8s"
)

// Run serves until ctx is cancelled.
func (s *Server) Run(ctx context.Context) error {
	return s.GenericAPIServer.PrepareRun().RunWithContext(ctx)
}

// newKindController serves every configured kind through mux and group;
// onServe is told of each kind served at run time (the guards).
func (c CompletedConfig) newKindController(mux *watchmux.Mux, objects *views.Objects, group *servedgroup.Group, hub *sourcefeed.HubHealth, onServe func(schema.GroupResource), local, hubTracked sourcefeed.Tracked) (*kindcontroller.Controller, error) {
	x := c.ExtraConfig
	return kindcontroller.New(kindcontroller.Config{
		Kinds:       x.Kinds,
		HostSchemas: x.HostSchemas,
		Overlayer:   x.Overlayer,
		Informers:   x.Informers,
		Streams:     local.Kinds,
		Discovery:   discoveryOf(x.Client),
		Dynamic:     x.Dynamic,
		Hub:         c.kindsHub(hub, hubTracked),
		Mux:         mux,
		Objects:     objects,
		Group:       group,
		Period:      x.KindPollInterval,
		Clock:       x.Clock,
		OnServe:     onServe,
		Progress:    x.sourceProgress(),
	})
}

// kindsHub is the hub of the global sources as the kind controller reads
// it; nil without one.
func (c CompletedConfig) kindsHub(hub *sourcefeed.HubHealth, hubTracked sourcefeed.Tracked) *kindcontroller.Hub {
	x := c.ExtraConfig
	if x.Hub == nil {
		return nil
	}
	return &kindcontroller.Hub{
		Name:            x.Hub.Name,
		Informers:       x.Hub.Informers,
		Dynamic:         x.Hub.Dynamic,
		GlobalNamespace: x.Policy.GlobalNamespace,
		Staleness:       hub.Stale,
		Streams:         hubTracked.Kinds,
	}
}

// sourceProgress is SourceProgress, or sourcefeed.DefaultProgress when unset.
func (x *ExtraConfig) sourceProgress() time.Duration {
	if x.SourceProgress > 0 {
		return x.SourceProgress
	}
	return sourcefeed.DefaultProgress
}
