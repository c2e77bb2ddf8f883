package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/compatibility"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/common"
	netutils "k8s.io/utils/net"

	"github.com/implicit-dev/implicit-apiserver/pkg/accessreview"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/apiserver"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/exceptions"
	"github.com/implicit-dev/implicit-apiserver/pkg/fleet"
	"github.com/implicit-dev/implicit-apiserver/pkg/kindcontroller"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/materialize"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/servedgroup"
	"github.com/implicit-dev/implicit-apiserver/pkg/sourcefeed"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
	"github.com/implicit-dev/implicit-apiserver/pkg/webhook"
)

// Options are implicit-apiserver's command-line options.
type Options struct {
	Recommended *genericoptions.RecommendedOptions

	// GlobalNamespace holds the global sources.
	GlobalNamespace string
	// ExcludeNamespaces are never tenants.
	ExcludeNamespaces []string
	// ConfigFile is an ImplicitConfiguration listing the served kinds.
	ConfigFile string
	// HostSchemaTimeout bounds the wait for the host's OpenAPI at start-up.
	HostSchemaTimeout time.Duration
	// MaxDepth is how many ancestors a namespace inherits from (0: all).
	MaxDepth int
	// PodNamespace is the server's own namespace, never a tenant; Complete
	// reads it from the pod when no flag sets it.
	PodNamespace string
	// WebhookConfiguration names the ValidatingWebhookConfiguration whose
	// match conditions the server keeps current; "" turns that off.
	WebhookConfiguration string
	// GlobalKubeconfig reaches the hub cluster the global namespace is read
	// from; GlobalClusterName names it in provenance.
	GlobalKubeconfig  string
	GlobalClusterName string
	// Fleet makes the server a member of its hub's fleet (fleet.go).
	Fleet FleetOptions
	// FleetHub: this cluster's global namespace is a fleet's hub.
	FleetHub bool
	// WebhookClientCAFile verifies the client certificate kube-apiserver
	// presents to the webhook endpoints; WebhookClientNames, when set, are
	// the common names allowed. AnonymousWebhooks opens the admission
	// endpoints to callers without one (managed control planes).
	WebhookClientCAFile string
	WebhookClientNames  []string
	AnonymousWebhooks   bool
	// HistoryBytes bounds the estimated bytes of the watch history.
	HistoryBytes int64
	// SourceProgress is how often each source is read for progress
	// (apiserver.ExtraConfig.SourceProgress).
	SourceProgress time.Duration
	// KubeAPIQPS and KubeAPIBurst limit the server's requests to the host
	// and hub clusters: the guards' parent lookups, the webhook
	// configuration sync, Events, the configured kinds' polling.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// AccessReviewQPS and AccessReviewBurst limit the guards' access
	// reviews, on a client of their own, shared fairly between requesters;
	// AccessReviewsPerRequest caps those one admission review may ask.
	AccessReviewQPS         float32
	AccessReviewBurst       int
	AccessReviewsPerRequest int
	// MaterializeQPS and MaterializeBurst limit the writes of materialized
	// copies; MaterializeLeaseName and MaterializeLeaseNamespace name the
	// Lease of the materializer's leader election (namespace default: the
	// server's own).
	MaterializeQPS            float32
	MaterializeBurst          int
	MaterializeWorkers        int
	MaterializeLeaseName      string
	MaterializeLeaseNamespace string
	// ExceptionWarningWindow is how long before an exception's end the
	// server warns of it (Events, implicit_exceptions_expiring_soon).
	ExceptionWarningWindow time.Duration
	// ShutdownDelay is how long the server goes on serving after SIGTERM
	// (its /readyz failing) before it ends its watches and stops listening.
	ShutdownDelay time.Duration
	// RequestTimeout bounds a request other than a watch, as
	// kube-apiserver's --request-timeout; 0 keeps the generic server's
	// default (one minute).
	RequestTimeout time.Duration
	// ShutdownCPUProfile, if set, is the file a CPU profile of the
	// shutdown is written to, from SIGTERM to the exit.
	ShutdownCPUProfile string
	// HTTP2WriteScheduler picks who serves the secure port and with which
	// HTTP/2 write scheduler (apiserver.ExtraConfig.HTTP2WriteScheduler).
	HTTP2WriteScheduler string

	// config is set by Complete from ConfigFile or the defaults.
	config Configuration
}

// DefaultHTTP2MaxStreamsPerConnection is the default of
// --http2-max-streams-per-connection (see NewOptions).
const DefaultHTTP2MaxStreamsPerConnection = 1000

// NewOptions returns the default options.
func NewOptions() *Options {
	rec := genericoptions.NewRecommendedOptions("", nil)
	// Views are computed from the host cluster's objects: no etcd of our own,
	// and nothing to admit since views are read-only.
	rec.Etcd = nil
	rec.Admission = nil
	rec.SecureServing.BindPort = 6443
	// kube-apiserver's aggregator proxies every view watch to this server,
	// packing them into as few HTTP/2 connections as this limit allows
	// (k8s.io/apiserver's default: 100), and its APIService availability
	// check shares those connections: when watches hold every stream, the
	// check waits for a new connection, and in a reconnect storm of 10,000
	// watches at 20 streams per connection (500 dials and TLS handshakes)
	// the APIService was unavailable in a third to four fifths of the
	// polls; at 1,000, in none or a few (docs/benchmarks.md, "Scale
	// edges"). The streams cost the fan-out nothing more since pkg/h2serve
	// serves the port with x/net's random write scheduler, which skips idle
	// streams (the round-robin one k8s.io/apiserver's serving uses walks
	// every open stream per frame: 29% of the CPU at 1,000 streams, hence
	// the earlier default of 20; --http2-write-scheduler=k8s brings it back).
	rec.SecureServing.HTTP2MaxStreamsPerConnection = DefaultHTTP2MaxStreamsPerConnection
	// The webhook endpoints authenticate their callers themselves (a client
	// certificate from --webhook-client-ca-file, see webhook.Callers): the
	// generic authentication and authorization leave them alone.
	rec.Authorization.AlwaysAllowPaths = withWebhookPaths(rec.Authorization.AlwaysAllowPaths)
	return &Options{
		WebhookConfiguration:    "implicit-apiserver",
		Recommended:             rec,
		GlobalNamespace:         "implicit-global",
		ExcludeNamespaces:       []string{"kube-system", "kube-public", "kube-node-lease"},
		HostSchemaTimeout:       2 * time.Minute,
		MaxDepth:                32,
		HistoryBytes:            watchmux.DefaultHistoryBytes,
		SourceProgress:          sourcefeed.DefaultProgress,
		HTTP2WriteScheduler:     apiserver.HTTP2SchedulerRandom,
		KubeAPIQPS:              50,
		KubeAPIBurst:            100,
		AccessReviewQPS:         accessreview.DefaultQPS,
		AccessReviewBurst:       accessreview.DefaultBurst,
		AccessReviewsPerRequest: accessreview.DefaultPerAdmission,
		MaterializeQPS:          50,
		MaterializeBurst:        100,
		MaterializeWorkers:      materialize.DefaultWorkers,
		MaterializeLeaseName:    materialize.DefaultLeaseName,
		ExceptionWarningWindow:  exceptions.DefaultWarningWindow,
		Fleet:                   FleetOptions{ReportInterval: fleet.DefaultReportInterval},
	}
}

// Flags returns the options' flags in named sets, as kube-apiserver prints them.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	fs := fss.FlagSet("implicit")
	fs.StringVar(&o.GlobalNamespace, "global-namespace", o.GlobalNamespace,
		"The namespace whose objects every tenant namespace inherits.")
	fs.StringSliceVar(&o.ExcludeNamespaces, "exclude-namespaces", o.ExcludeNamespaces,
		"Namespaces that are never tenants: their views hold their local objects only.")
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile,
		"Path to an ImplicitConfiguration (config.implicit.dev/v1alpha1) listing the served kinds. "+
			"Without it: rolebindings, roles and networkpolicies.")
	fs.DurationVar(&o.HostSchemaTimeout, "host-schema-timeout", o.HostSchemaTimeout,
		"How long to wait at start-up for the host cluster's OpenAPI schemas of the source kinds.")
	fs.IntVar(&o.MaxDepth, "max-depth", o.MaxDepth,
		"How many ancestors (implicit.dev/parent) a namespace inherits from, nearest first; farther ones are cut off "+
			"and reported (DepthExceeded). Bounds the cost of a change in a deep hierarchy. 0: no limit.")
	fs.StringVar(&o.PodNamespace, "pod-namespace", o.PodNamespace,
		"The server's own namespace, which is never a tenant whatever its labels. Empty: $POD_NAMESPACE, else the "+
			"service account's namespace file.")
	fs.StringVar(&o.GlobalKubeconfig, "global-kubeconfig", o.GlobalKubeconfig,
		"Kubeconfig of the hub cluster whose global namespace holds the global sources. Empty: the global namespace of this cluster.")
	fs.StringVar(&o.GlobalClusterName, "global-cluster-name", o.GlobalClusterName,
		"The hub cluster's name, in the implicit.dev/source-cluster annotation of the items it provides. Required with --global-kubeconfig.")
	fs.BoolVar(&o.FleetHub, "fleet-hub", o.FleetHub,
		"This cluster is a fleet's hub: read the members' reports (memberclusters.fleet.implicit.dev, artifacts/fleet/hub), count their "+
			"namespaces in the fan-out warning of a global source's change, and export implicit_fleet_member_* metrics.")
	fs.StringVar(&o.WebhookConfiguration, "webhook-configuration", o.WebhookConfiguration,
		"The ValidatingWebhookConfiguration of the guards whose match conditions (locked names, inherited namespaces) "+
			"the server keeps current. Empty: don't.")
	fs.StringVar(&o.WebhookClientCAFile, "webhook-client-ca-file", o.WebhookClientCAFile,
		"PEM CA bundle that verifies the client certificate kube-apiserver presents when it calls the webhooks "+
			"(/authorize and /admission/*). Without it, they refuse every caller (unless --anonymous-webhooks).")
	fs.StringSliceVar(&o.WebhookClientNames, "webhook-client-names", o.WebhookClientNames,
		"Common names allowed in webhook callers' client certificates. Empty: any certificate the CA signed for client authentication.")
	fs.BoolVar(&o.AnonymousWebhooks, "anonymous-webhooks", o.AnonymousWebhooks,
		"Answer the admission webhooks (/admission/*) without a client certificate, for managed control planes whose "+
			"kube-apiserver can't present one: restrict who reaches the port (NetworkPolicy). /authorize still requires one.")
	fs.Int64Var(&o.HistoryBytes, "history-bytes", o.HistoryBytes,
		"Bound on the estimated bytes of the objects the watch history keeps for resuming watches (besides its 100,000 events).")
	fs.DurationVar(&o.SourceProgress, "source-progress-interval", o.SourceProgress,
		"How often each source (namespaces, and each kind the views read) is read consistently with limit=1 and its informer's watch "+
			"renewed, so that the versions the server issues name revisions within about two intervals of etcd's current one even "+
			"while a source is quiet. Keep it well below kube-apiserver's --etcd-compaction-interval (5m by default): a version "+
			"naming a compacted revision can only be answered 410 by a replica that must list at it.")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout,
		"How long a request other than a watch may take, as kube-apiserver's flag of the same name (0: one minute). "+
			"A list of every namespace's view streams its items, but a very large one on a busy server may need longer; "+
			"kube-apiserver's own --request-timeout bounds the same request through the aggregator.")
	fs.DurationVar(&o.ShutdownDelay, "shutdown-delay-duration", o.ShutdownDelay,
		"How long to go on serving after SIGTERM, /readyz failing, before ending the watches and no longer accepting requests, "+
			"as kube-apiserver's flag of the same name: time for kube-apiserver to see the pod leave the Service's endpoints, so "+
			"that the watches it ends resume on another replica instead of meeting a closed port (a 503, and client-go relists).")

	fs.StringVar(&o.ShutdownCPUProfile, "shutdown-cpu-profile", o.ShutdownCPUProfile,
		"Diagnostics: write a CPU profile of the shutdown, from SIGTERM to the exit, to this file (go tool pprof reads it). Empty: none.")

	o.Recommended.SecureServing.AddFlags(fss.FlagSet("secure serving"))
	fss.FlagSet("secure serving").StringVar(&o.HTTP2WriteScheduler, "http2-write-scheduler", o.HTTP2WriteScheduler,
		"Who serves the secure port's HTTP/2 connections: \"random\", this server's own HTTP server with golang.org/x/net/http2's "+
			"random write scheduler, which keeps only streams with frames queued (a frame costs the same however many idle watches "+
			"share its connection); or \"k8s\", k8s.io/apiserver's own serving, whose round-robin scheduler walks every open stream "+
			"of a connection per frame (the fallback; same settings otherwise).")
	o.Recommended.Authentication.AddFlags(fss.FlagSet("authentication"))
	o.Recommended.Authorization.AddFlags(fss.FlagSet("authorization"))
	o.Recommended.CoreAPI.AddFlags(fss.FlagSet("host cluster"))
	hostFS := fss.FlagSet("host cluster")
	hostFS.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS,
		"Requests per second to the host (and hub) kube-apiserver: the guards' parent lookups, the webhook configuration sync, Events, "+
			"the configured kinds' polling (the guards' access reviews have --access-review-qps).")
	hostFS.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst,
		"Burst of requests to the host (and hub) kube-apiserver above --kube-api-qps.")
	gfs := fss.FlagSet("guards")
	gfs.Float32Var(&o.AccessReviewQPS, "access-review-qps", o.AccessReviewQPS,
		"SubjectAccessReviews per second the admission guards may ask the host, on a connection of their own; requesters take turns "+
			"(a ServiceAccount's turn is its namespace's), so one requester's flood can't delay the others.")
	gfs.IntVar(&o.AccessReviewBurst, "access-review-burst", o.AccessReviewBurst,
		"Burst of the guards' SubjectAccessReviews above --access-review-qps.")
	gfs.IntVar(&o.AccessReviewsPerRequest, "access-reviews-per-request", o.AccessReviewsPerRequest,
		"Most SubjectAccessReviews one guarded request may need; a request needing more is refused, saying why "+
			"(e.g. opting out of many locked items granted one by one).")
	mfs := fss.FlagSet("materialize")
	mfs.Float32Var(&o.MaterializeQPS, "materialize-qps", o.MaterializeQPS,
		"Writes per second of materialized copies (kinds configured with delivery: Materialize), across all namespaces.")
	mfs.IntVar(&o.MaterializeBurst, "materialize-burst", o.MaterializeBurst,
		"Burst of writes of materialized copies above --materialize-qps.")
	mfs.IntVar(&o.MaterializeWorkers, "materialize-workers", o.MaterializeWorkers,
		"Writes of materialized copies in flight at once (each namespace's by one worker at a time); with --materialize-qps they bound the writes per second.")
	mfs.StringVar(&o.MaterializeLeaseName, "materialize-lease-name", o.MaterializeLeaseName,
		"The Lease the replicas campaign for: only its holder writes materialized copies.")
	mfs.StringVar(&o.MaterializeLeaseNamespace, "materialize-lease-namespace", o.MaterializeLeaseNamespace,
		"The namespace of the materializer's Lease. Empty: the server's own (--pod-namespace); without one, no leader election (one replica only).")
	efs := fss.FlagSet("exceptions")
	efs.DurationVar(&o.ExceptionWarningWindow, "exception-warning-window", o.ExceptionWarningWindow,
		"How long before an exception's end (implicit.dev/exceptions' expiresAt) a Warning Event ExceptionExpiresSoon is recorded on its "+
			"namespace and the exception counts in implicit_exceptions_expiring_soon.")
	o.Fleet.AddFlags(fss.FlagSet("fleet"))
	o.Recommended.Audit.AddFlags(fss.FlagSet("auditing"))
	o.Recommended.Features.AddFlags(fss.FlagSet("features"))
	o.Recommended.EgressSelector.AddFlags(fss.FlagSet("egress selector"))
	o.Recommended.Traces.AddFlags(fss.FlagSet("traces"))
	return fss
}

// AddFlags adds every flag set to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	for _, f := range o.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
}

// Complete reads the configuration file and fills in derived values.
func (o *Options) Complete() error {
	o.completePodNamespace()
	// --authorization-always-allow-paths replaces the default list: an
	// operator who adds /metrics must not drop the webhooks, which
	// kube-apiserver calls with failurePolicy Fail.
	o.Recommended.Authorization.AlwaysAllowPaths = withWebhookPaths(o.Recommended.Authorization.AlwaysAllowPaths)
	o.config = DefaultConfiguration()
	if o.ConfigFile != "" {
		cfg, err := LoadConfiguration(o.ConfigFile)
		if err != nil {
			return err
		}
		o.config = cfg
	}
	return nil
}

// Validate checks the options and returns every problem at once.
func (o *Options) Validate() error {
	var errs []error
	errs = append(errs, o.Recommended.SecureServing.Validate()...)
	errs = append(errs, o.Recommended.Authentication.Validate()...)
	errs = append(errs, o.Recommended.Authorization.Validate()...)
	errs = append(errs, o.Recommended.CoreAPI.Validate()...)
	errs = append(errs, o.Recommended.Audit.Validate()...)
	errs = append(errs, o.Recommended.Features.Validate()...)
	errs = append(errs, o.Recommended.EgressSelector.Validate()...)
	errs = append(errs, o.Recommended.Traces.Validate()...)
	if msgs := validation.IsDNS1123Label(o.GlobalNamespace); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--global-namespace %q: %s", o.GlobalNamespace, strings.Join(msgs, ", ")))
	}
	for _, ns := range o.ExcludeNamespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--exclude-namespaces %q: %s", ns, strings.Join(msgs, ", ")))
		}
		if ns == o.GlobalNamespace {
			errs = append(errs, fmt.Errorf("--exclude-namespaces lists the global namespace %q", ns))
		}
	}
	if o.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("--request-timeout %s: must not be negative", o.RequestTimeout))
	}
	if o.HTTP2WriteScheduler != apiserver.HTTP2SchedulerRandom && o.HTTP2WriteScheduler != apiserver.HTTP2SchedulerK8s {
		errs = append(errs, fmt.Errorf("--http2-write-scheduler %q: must be %q or %q", o.HTTP2WriteScheduler, apiserver.HTTP2SchedulerRandom, apiserver.HTTP2SchedulerK8s))
	}
	if o.ShutdownDelay < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-delay-duration %s: must not be negative", o.ShutdownDelay))
	}
	switch {
	case o.GlobalKubeconfig != "" && o.GlobalClusterName == "":
		errs = append(errs, fmt.Errorf("--global-cluster-name is required with --global-kubeconfig"))
	case o.GlobalKubeconfig == "" && o.GlobalClusterName != "":
		errs = append(errs, fmt.Errorf("--global-cluster-name needs --global-kubeconfig"))
	case o.GlobalClusterName != "":
		if msgs := validation.IsDNS1123Subdomain(o.GlobalClusterName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--global-cluster-name %q: %s", o.GlobalClusterName, strings.Join(msgs, ", ")))
		}
	}
	errs = append(errs, o.Fleet.Validate(o.GlobalKubeconfig)...)
	if o.FleetHub && o.GlobalKubeconfig != "" {
		errs = append(errs, fmt.Errorf("--fleet-hub is a hub's: its global namespace is its own, not read with --global-kubeconfig"))
	}
	if o.GlobalKubeconfig != "" && len(o.config.globalNamespaces()) > 0 {
		errs = append(errs, fmt.Errorf("--config: a kind's own globalNamespace is not supported with --global-kubeconfig: the hub's global namespace is the global scope of every kind"))
	}
	if o.HostSchemaTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--host-schema-timeout must be positive"))
	}
	if o.MaxDepth < 0 {
		errs = append(errs, fmt.Errorf("--max-depth must be 0 (no limit) or positive"))
	}
	if o.PodNamespace != "" {
		if msgs := validation.IsDNS1123Label(o.PodNamespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--pod-namespace %q: %s", o.PodNamespace, strings.Join(msgs, ", ")))
		}
	}
	if o.KubeAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be positive"))
	}
	if o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be at least 1"))
	}
	if o.AccessReviewQPS <= 0 {
		errs = append(errs, fmt.Errorf("--access-review-qps must be positive"))
	}
	if o.AccessReviewBurst < 1 {
		errs = append(errs, fmt.Errorf("--access-review-burst must be at least 1"))
	}
	if o.AccessReviewsPerRequest < 1 {
		errs = append(errs, fmt.Errorf("--access-reviews-per-request must be at least 1"))
	}
	if o.ExceptionWarningWindow <= 0 {
		errs = append(errs, fmt.Errorf("--exception-warning-window %s: must be positive", o.ExceptionWarningWindow))
	}
	if o.MaterializeQPS <= 0 {
		errs = append(errs, fmt.Errorf("--materialize-qps must be positive"))
	}
	if o.MaterializeBurst < 1 {
		errs = append(errs, fmt.Errorf("--materialize-burst must be at least 1"))
	}
	if o.MaterializeWorkers < 1 {
		errs = append(errs, fmt.Errorf("--materialize-workers must be at least 1"))
	}
	if o.SourceProgress < 3*time.Second {
		errs = append(errs, fmt.Errorf("--source-progress-interval must be at least 3s (kube-apiserver's watch cache bookmarks 2s before a watch ends), got %s", o.SourceProgress))
	}
	if o.HistoryBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("--history-bytes must be at least 1Mi (1048576)"))
	}
	if len(o.WebhookClientNames) > 0 && o.WebhookClientCAFile == "" {
		errs = append(errs, fmt.Errorf("--webhook-client-names needs --webhook-client-ca-file"))
	}
	return utilerrors.NewAggregate(errs)
}

// Config builds the server configuration. It reads the source kinds'
// schemas from the host cluster, waiting up to HostSchemaTimeout for it.
func (o *Options) Config(ctx context.Context) (*apiserver.Config, error) {
	if err := maybeSelfSign(o.Recommended.SecureServing.SecureServingOptions, "localhost", []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("creating self-signed certificates: %w", err)
	}
	scheme := servedgroup.NewScheme(kinds.Typed(o.config.Kinds))
	codecs := servedgroup.NewCodecs(scheme)

	gc := genericapiserver.NewRecommendedConfig(codecs)
	gc.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	// The host's schemas are read once the host client exists, after
	// ApplyTo. The v2 definitions are rendered when the server starts; the v3
	// configuration renders them when it is made, so it is made last.
	var host servedgroup.HostSchemas
	namer := openapinamer.NewDefinitionNamer(scheme)
	gc.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(func(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
		return servedgroup.Definitions(host, namer.GetDefinitionName)(ref)
	}, namer)
	gc.OpenAPIConfig.Info.Title = "implicit-apiserver"
	gc.OpenAPIConfig.Info.Version = servedgroup.SchemeGroupVersion.Version

	if err := o.Recommended.ApplyTo(gc); err != nil {
		return nil, err
	}
	gc.ShutdownDelayDuration = o.ShutdownDelay
	if o.RequestTimeout > 0 {
		gc.RequestTimeout = o.RequestTimeout
	}
	if gc.Authorization.Authorizer != nil {
		// One review per user for reads across namespaces (clusterwide.go).
		gc.Authorization.Authorizer = newClusterWideReads(gc.Authorization.Authorizer, o.Recommended.Authorization.AllowCacheTTL, o.Recommended.Authorization.DenyCacheTTL)
	}
	o.limitClient(gc.ClientConfig)
	client, err := kubernetes.NewForConfig(gc.ClientConfig)
	if err != nil {
		return nil, fmt.Errorf("host cluster client: %w", err)
	}
	host, err = waitForHostSchemas(ctx, client.Discovery(), kinds.Typed(o.config.Kinds), o.HostSchemaTimeout)
	if err != nil {
		return nil, err
	}
	if err := CheckResources(client.Discovery(), o.config.Kinds); err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(gc.ClientConfig)
	if err != nil {
		return nil, fmt.Errorf("host cluster client: %w", err)
	}
	gc.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(servedgroup.Definitions(host, namer.GetDefinitionName), namer)
	gc.OpenAPIV3Config.Info.Title = "implicit-apiserver"
	gc.OpenAPIV3Config.Info.Version = servedgroup.SchemeGroupVersion.Version

	callers := webhook.Callers{Names: o.WebhookClientNames}
	if o.WebhookClientCAFile != "" {
		// Reloaded when the file changes, like --client-ca-file.
		if callers.CA, err = dynamiccertificates.NewDynamicCAContentFromFile("webhook-client-ca", o.WebhookClientCAFile); err != nil {
			return nil, fmt.Errorf("--webhook-client-ca-file: %w", err)
		}
	}

	// The guards' access reviews: no client-side limit (the fair queue of
	// pkg/accessreview holds the rate) and a connection of their own.
	reviews, err := kubernetes.NewForConfig(ownConnection(gc.ClientConfig, -1, 0))
	if err != nil {
		return nil, fmt.Errorf("host cluster client: %w", err)
	}
	// The replicas' guards take turns on a Lease in the server's namespace,
	// on a connection of their own: one write per allowed guarded decision.
	var ledger admission.Ledger
	if o.PodNamespace != "" {
		lc, err := kubernetes.NewForConfig(ownConnection(gc.ClientConfig, 100, 200))
		if err != nil {
			return nil, fmt.Errorf("host cluster client: %w", err)
		}
		identity, _ := os.Hostname()
		ledger = &admission.LeaseLedger{Client: lc.CoordinationV1().Leases(o.PodNamespace), Name: admission.DefaultLedgerLease, Identity: identity}
	}

	var mat apiserver.MaterializeConfig
	if o.config.materialized() {
		// The copies' writes have their own rate limit and connection: a
		// burst of them (and the copies' informer, which shows each back)
		// neither queues behind nor holds up the views' informers.
		// The built-in kinds' copies go in protobuf (issue 45), on the
		// same connection and rate limit as the dynamic client's.
		mc := ownConnection(gc.ClientConfig, o.MaterializeQPS, o.MaterializeBurst)
		if mc.QPS > 0 {
			mc.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(mc.QPS, mc.Burst)
		}
		hc, err := rest.HTTPClientFor(mc)
		if err != nil {
			return nil, fmt.Errorf("host cluster client: %w", err)
		}
		if mat.Dynamic, err = dynamic.NewForConfigAndClient(mc, hc); err != nil {
			return nil, fmt.Errorf("host cluster client: %w", err)
		}
		if mat.Protobuf, err = materialize.NewProtobuf(mc, hc); err != nil {
			return nil, fmt.Errorf("host cluster client: %w", err)
		}
		mat.Workers = o.MaterializeWorkers
		mat.LeaseName, mat.LeaseNamespace = o.MaterializeLeaseName, o.MaterializeLeaseNamespace
		// The Lease is renewed on a client of its own: a flood of guarded
		// writes must not cost the materializer its Lease. A renewal is a
		// read and a write every 2s.
		if mat.LeaseClient, err = kubernetes.NewForConfig(ownConnection(gc.ClientConfig, 5, 10)); err != nil {
			return nil, fmt.Errorf("host cluster client: %w", err)
		}
		if mat.LeaseNamespace == "" {
			mat.LeaseNamespace = o.PodNamespace
		}
	}

	// The expiry marks have a connection and a rate limit of their own: a
	// thousand exceptions ending in one second are a thousand writes, which
	// must neither wait behind the server's other requests nor hold them up.
	exceptionsClient, err := kubernetes.NewForConfig(ownConnection(gc.ClientConfig, exceptionsQPS, 2*exceptionsQPS))
	if err != nil {
		return nil, fmt.Errorf("host cluster client: %w", err)
	}

	var hub *apiserver.HubConfig
	if o.GlobalKubeconfig != "" {
		if hub, err = o.hubConfig(); err != nil {
			return nil, err
		}
	}
	return &apiserver.Config{
		GenericConfig: gc,
		ExtraConfig: apiserver.ExtraConfig{
			Kinds:         o.config.Kinds,
			HostSchemas:   host,
			Namer:         namer.GetDefinitionName,
			Overlayer:     merge.NewOverlayer,
			Dynamic:       dyn,
			Policy:        o.policy(),
			Scheme:        scheme,
			Codecs:        codecs,
			Client:        client,
			Informers:     gc.SharedInformerFactory,
			AccessReviews: reviews.AuthorizationV1().SubjectAccessReviews(),
			AccessReviewOptions: accessreview.Options{
				QPS: float64(o.AccessReviewQPS), Burst: o.AccessReviewBurst, PerAdmission: o.AccessReviewsPerRequest,
			},
			WebhookConfiguration:   o.WebhookConfiguration,
			Hub:                    hub,
			FleetHub:               o.FleetHub,
			WebhookCallers:         callers,
			AnonymousWebhooks:      o.AnonymousWebhooks,
			Watch:                  watchmux.Options{HistoryBytes: o.HistoryBytes},
			SourceProgress:         o.SourceProgress,
			HTTP2WriteScheduler:    o.HTTP2WriteScheduler,
			Materialize:            mat,
			GuardLedger:            ledger,
			ExceptionWarningWindow: o.ExceptionWarningWindow,
			ExceptionsClient:       exceptionsClient,
		},
	}, nil
}

func waitForHostSchemas(ctx context.Context, dc discovery.DiscoveryInterface, typed []kinds.Kind, timeout time.Duration) (servedgroup.HostSchemas, error) {
	gvs := sets.New[schema.GroupVersion]()
	for _, k := range typed {
		gvs.Insert(k.Source.GroupVersion())
	}
	var host servedgroup.HostSchemas
	var last error
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		host, last = kindcontroller.FetchHostSchemas(ctx, dc, gvs.UnsortedList())
		if last != nil {
			klog.InfoS("Waiting for the host cluster's OpenAPI schemas", "err", last)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the source kinds' schemas from the host cluster: %w (last error: %v)", err, last)
	}
	return host, nil
}

// hubConfig builds the client and the global-namespace informers of the hub.
// The hub may be down at start: the server starts, and is ready once it has
// read the hub's global sources.
func (o *Options) hubConfig() (*apiserver.HubConfig, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.GlobalKubeconfig}, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--global-kubeconfig %s: %w", o.GlobalKubeconfig, err)
	}
	o.limitClient(cfg)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("hub cluster client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("hub cluster client: %w", err)
	}
	member, err := o.Fleet.config(o.GlobalKubeconfig)
	if err != nil {
		return nil, err
	}
	return &apiserver.HubConfig{
		Name:      o.GlobalClusterName,
		Client:    client,
		Dynamic:   dyn,
		Informers: informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(o.GlobalNamespace)),
		Member:    member,
	}, nil
}

// withWebhookPaths returns paths with the webhook endpoints (/authorize and
// every admission guard's) added where missing. They authenticate their
// callers themselves (webhook.Callers), so the generic authorizer must always
// let them through, whatever --authorization-always-allow-paths says.
func withWebhookPaths(paths []string) []string {
	out := slices.Clone(paths)
	for _, p := range append([]string{authz.Path}, webhookconfig.Paths...) {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// ownConnection returns a copy of cfg with the rate limit qps and burst
// (qps < 0: none) that opens a connection of its own: client-go shares one
// transport, and so one HTTP/2 connection, between the clients of equal TLS
// configurations unless their dialers differ.
func ownConnection(cfg *rest.Config, qps float32, burst int) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = qps, burst
	c.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	return c
}

// limitClient sets the client-side rate limit of a host or hub client. Left
// at client-go's default (5 per second, bursts of 10), every guarded write
// waited its turn behind the others' access reviews: a parent change took
// 400 ms of which nearly all was the limiter.
func (o *Options) limitClient(cfg *rest.Config) {
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
}

// exceptionsQPS is the rate of the expiry marks' writes (and twice it
// their burst).
const exceptionsQPS = 100
