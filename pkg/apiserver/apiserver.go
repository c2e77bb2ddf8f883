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
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/common"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/hierarchy"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// ExtraConfig is implicit-apiserver's own configuration.
type ExtraConfig struct {
	// Kinds are the built-in views (typed), served from the start.
	Kinds []registry.Kind
	// Strategies are the merge strategies of Kinds by resource (default Replace).
	Strategies map[string]merge.Strategy
	// Globals are the global namespaces of kinds configured with their own,
	// by resource (they must be Policy.Excluded).
	Globals map[string]string
	// Resources are the other configured kinds, served from unstructured
	// objects once the host serves them (kindController).
	Resources []Resource
	// HostSchemas are the host's OpenAPI schemas of Kinds.
	HostSchemas HostSchemas
	// Namer names OpenAPI definitions (the scheme's namer).
	Namer DefinitionNamer
	// Overlayer builds a kind's overlayer from its schema; nil: no overlays.
	Overlayer NewOverlayer
	// Dynamic reaches the host cluster for the configured kinds.
	Dynamic dynamic.Interface
	// KindPollInterval is how often the host is asked about configured
	// kinds (default 3s).
	KindPollInterval time.Duration
	// Policy says which namespace is global and which are not tenants.
	Policy merge.Policy
	// Scheme and Codecs hold the view types (see NewScheme).
	Scheme *runtime.Scheme
	Codecs serializer.CodecFactory
	// Client and Informers reach the host cluster: namespaces and sources.
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	// Watch tunes the watch multiplexer.
	Watch watchmux.Options
	// WebhookConfiguration names the ValidatingWebhookConfiguration whose
	// match conditions are kept current; "" for none.
	WebhookConfiguration string
	// Hub, when set, is the cluster the global sources are read from: its
	// client, informers restricted to the global namespace, and its name.
	Hub *HubConfig
	// WebhookCallers may call the webhook endpoints (/authorize and
	// /admission/*); AnonymousWebhooks opens the admission ones to anyone.
	WebhookCallers    authz.Callers
	AnonymousWebhooks bool
	// Materialize writes the views of kinds configured with delivery:
	// Materialize as real objects (pkg/materialize); no Kinds: none.
	Materialize MaterializeConfig
}

// MaterializeConfig configures the materializer.
type MaterializeConfig struct {
	// Kinds are the source kinds materialized.
	Kinds []schema.GroupVersionResource
	// Dynamic writes the copies, with its own rate limit.
	Dynamic dynamic.Interface
	// LeaseNamespace and LeaseName name the leader election's Lease; no
	// namespace: no election.
	LeaseNamespace, LeaseName string
}

// HubConfig reaches the hub cluster of the global sources.
type HubConfig struct {
	Name      string
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
	// Dynamic reads the configured kinds' global sources on the hub.
	Dynamic dynamic.Interface
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
	x := c.ExtraConfig
	nsInformer := x.Informers.Core().V1().Namespaces()

	resources := make([]string, 0, len(x.Kinds))
	newObject := map[string]func() runtime.Object{}
	for _, k := range x.Kinds {
		resources = append(resources, k.Resource())
		newObject[k.Resource()] = k.New
	}
	objects := views.NewObjects(newObject, 0)
	mux := watchmux.New(x.Policy, resources, objects, x.Watch)
	var hub *hubHealth
	if x.Hub != nil {
		hub = newHubHealth(x.Hub.Name, x.Hub.Client)
		objects.WithStaleness(hub.stale)
	}
	for resource, ns := range x.Globals {
		mux.SetGlobalNamespace(resource, ns)
	}
	if err := mux.AddNamespaceInformer(nsInformer.Informer()); err != nil {
		return nil, err
	}

	viewers := map[string]registry.Viewer{}
	for _, k := range x.Kinds {
		if x.Overlayer != nil {
			o := merge.Options{Strategy: x.Strategies[k.Resource()]}
			ov, err := x.Overlayer(x.HostSchemas, k.Model)
			if err != nil {
				return nil, fmt.Errorf("overlays of %s: %w", k.Source, err)
			}
			o.Overlayer = ov
			mux.SetMergeOptions(k.Resource(), o)
		}
		gi, err := x.Informers.ForResource(k.Source)
		if err != nil {
			return nil, fmt.Errorf("no informer for %s: %w", k.Source, err)
		}
		if _, err := mux.AddSource(k.Resource(), watchmux.Source{Informer: gi.Informer()}); err != nil {
			return nil, err
		}
		view := views.New(gr(k), mux)
		if x.Hub != nil {
			hi, err := x.Hub.Informers.ForResource(k.Source)
			if err != nil {
				return nil, fmt.Errorf("no informer for %s on the hub: %w", k.Source, err)
			}
			if _, err := mux.AddSource(k.Resource(), watchmux.Source{Informer: hi.Informer(), Cluster: x.Hub.Name}); err != nil {
				return nil, err
			}
			view.WithStaleness(hub.stale)
		}
		viewers[k.Resource()] = view
	}

	schemas := newSchemaStore(x.HostSchemas)
	group := &servedGroup{
		scheme:            x.Scheme,
		codecs:            x.Codecs,
		minRequestTimeout: time.Duration(c.GenericConfig.MinRequestTimeout) * time.Second,
	}
	if v2, v3 := c.GenericConfig.OpenAPIConfig, c.GenericConfig.OpenAPIV3Config; v2 != nil && v3 != nil && x.Namer != nil {
		group.openAPI = func() (*common.Config, *common.OpenAPIV3Config) {
			all, models := schemas.snapshot()
			namer := viewNamer(x.Namer, models)
			c2, c3 := *v2, *v3
			c2.GetDefinitions, c2.GetDefinitionName = all.Definitions(namer), namer
			c3.GetDefinitions, c3.GetDefinitionName, c3.Definitions = all.Definitions(namer), namer, nil
			return &c2, &c3
		}
	}

	c.GenericConfig.BuildHandlerChainFunc = func(h http.Handler, gc *genericapiserver.Config) http.Handler {
		return genericapiserver.DefaultBuildHandlerChain(readOnly(h, group.storage, x.Codecs), gc)
	}
	admissionCallers, err := c.webhookCallers()
	if err != nil {
		return nil, err
	}
	gs, err := c.GenericConfig.New("implicit-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	group.gs = gs
	// The answers beside the views, authorized like them (pkg/registry).
	group.questions = questions(mux, gs.Authorizer, group.kinds)
	gs.Handler.NonGoRestfulMux.Handle(genericapiserver.APIGroupPrefix+"/"+GroupName, group.groupHandler())
	gs.Handler.NonGoRestfulMux.HandlePrefix(genericapiserver.APIGroupPrefix+"/"+GroupName+"/", group)

	// The admission guards, on their own paths of the secure port.
	served := make([]schema.GroupResource, 0, len(x.Kinds))
	for _, k := range x.Kinds {
		served = append(served, k.Source.GroupResource())
	}
	var sar admission.Authorizer = admission.SARAuthorizer{}
	if x.Client != nil {
		sar = admission.SARAuthorizer{Client: x.Client.AuthorizationV1().SubjectAccessReviews()}
	}
	index := admission.NewIndex(mux)
	guards := admission.NewGuards(index, sar, served, x.Policy.GlobalNamespace)
	if x.Client != nil {
		// The parent-uid webhook reads parents from kube-apiserver.
		guards.SetNamespaces(x.Client.CoreV1().Namespaces())
	}
	for _, ns := range x.Globals {
		guards.AddGlobalNamespace(ns)
	}
	if err := c.startMaterializer(gs, mux, guards); err != nil {
		return nil, err
	}
	for _, p := range admission.Paths {
		gs.Handler.NonGoRestfulMux.Handle(p, admissionCallers(guards.Handler(p)))
	}
	if x.Client != nil && x.WebhookConfiguration != "" {
		sync := &admission.ConditionSync{
			Client:          x.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations(),
			Kube:            x.Client,
			Name:            x.WebhookConfiguration,
			GlobalNamespace: x.Policy.GlobalNamespace,
			Source:          index,
			Served:          group.sources,
		}
		if err := gs.AddPostStartHook("implicit-webhook-conditions", func(ctx genericapiserver.PostStartHookContext) error {
			go sync.Run(ctx)
			return nil
		}); err != nil {
			return nil, err
		}
	}

	// The authorization webhook: inherited RoleBindings grant access.
	authorizer, err := authz.New(mux, x.Informers.Rbac().V1().ClusterRoles().Informer(), 0)
	if err != nil {
		return nil, err
	}
	gs.Handler.NonGoRestfulMux.Handle(authz.Path, x.WebhookCallers.Require(authorizer.Handler()))

	kinds := &kindController{
		resources:  x.Resources,
		dc:         discoveryOf(x.Client),
		dyn:        x.Dynamic,
		mux:        mux,
		objects:    objects,
		group:      group,
		schemas:    schemas,
		overlayer:  x.Overlayer,
		static:     x.Kinds,
		staticView: viewers,
		period:     x.KindPollInterval,
		kinds:      map[string]*dynamicKind{},
		checked:    make(chan struct{}),
		onServe:    guards.Serve,
	}
	if kinds.period <= 0 {
		kinds.period = 3 * time.Second
	}
	if x.Dynamic != nil {
		kinds.factory = dynamicinformer.NewDynamicSharedInformerFactory(x.Dynamic, 0)
	}
	if x.Hub != nil && x.Hub.Dynamic != nil {
		kinds.hub = x.Hub
		kinds.staleness = hub.stale
		kinds.hubFactory = dynamicinformer.NewFilteredDynamicSharedInformerFactory(x.Hub.Dynamic, 0, x.Policy.GlobalNamespace, nil)
	}
	if len(x.Resources) > 0 && (kinds.factory == nil || kinds.dc == nil) {
		return nil, fmt.Errorf("configured kinds %v need a host cluster client", x.Resources)
	}
	if err := gs.AddPostStartHook("implicit-served-kinds", func(ctx genericapiserver.PostStartHookContext) error {
		go kinds.Run(ctx)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := gs.AddReadyzChecks(healthz.NamedCheck("configured-kinds", func(*http.Request) error {
		if kinds.hasChecked() && group.current.Load() != nil {
			return nil
		}
		return fmt.Errorf("the configured kinds have not been looked up in the host cluster yet")
	})); err != nil {
		return nil, err
	}

	// Ready only once every source has been listed: before that a view would
	// silently miss inherited items.
	if err := gs.AddReadyzChecks(healthz.NamedCheck("sources-synced", func(*http.Request) error {
		if mux.HasSynced() {
			return nil
		}
		if hub != nil {
			if err := hub.unreached(); err != nil {
				return fmt.Errorf("the global sources on hub cluster %q have never been read: %v", x.Hub.Name, err)
			}
		}
		return fmt.Errorf("the namespaces and source objects have not all been read yet")
	})); err != nil {
		return nil, err
	}
	if x.Hub != nil {
		if err := gs.AddPostStartHook("implicit-hub-informers", func(ctx genericapiserver.PostStartHookContext) error {
			x.Hub.Informers.Start(ctx.Done())
			go hub.run(ctx)
			go func() {
				<-ctx.Done()
				x.Hub.Informers.Shutdown()
			}()
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if err := gs.AddPostStartHook("implicit-watch-multiplexer", func(ctx genericapiserver.PostStartHookContext) error {
		go mux.Run(ctx)
		return nil
	}); err != nil {
		return nil, err
	}

	reporter, err := hierarchy.NewReporter(x.Policy, nsInformer)
	if err != nil {
		return nil, err
	}
	if err := gs.AddPostStartHook("implicit-hierarchy-reporter", func(ctx genericapiserver.PostStartHookContext) error {
		var recorder record.EventRecorder
		if x.Client != nil {
			recorder = newRecorder(ctx, x.Client)
		}
		go reporter.Run(ctx, recorder)
		return nil
	}); err != nil {
		return nil, err
	}
	return &Server{GenericAPIServer: gs}, nil
}

// discoveryOf returns the host's discovery client; nil without a client.
func discoveryOf(c kubernetes.Interface) discovery.DiscoveryInterface {
	if c == nil {
		return nil
	}
	return c.Discovery()
}

// gr is the view's group and resource of kind k.
func gr(k registry.Kind) schema.GroupResource {
	return SchemeGroupVersion.WithResource(k.Resource()).GroupResource()
}

// Run serves until ctx is cancelled.
func (s *Server) Run(ctx context.Context) error {
	return s.GenericAPIServer.PrepareRun().RunWithContext(ctx)
}

// webhookCallers prepares the webhook endpoints' own authentication, before
// the handler chain is built: the generic authentication skips their paths
// (a webhook client certificate need not be one it knows, and one it can't
// verify would be refused), and the serving TLS configuration requests
// client certificates advertising the webhook client CA too (a client only
// sends a certificate signed by an advertised CA). It returns what wraps
// each admission guard: authz.Callers.Require, or nothing with
// AnonymousWebhooks; /authorize always requires a certificate.
func (c CompletedConfig) webhookCallers() (func(http.Handler) http.Handler, error) {
	x := c.ExtraConfig
	gc := c.GenericConfig
	paths := append([]string{authz.Path}, admission.Paths...)
	if gc.Authentication.Authenticator != nil {
		gc.Authentication.Authenticator = authz.SkipAuthentication(gc.Authentication.Authenticator, paths)
	}
	if x.WebhookCallers.CA != nil {
		if err := gc.Authentication.ApplyClientCert(x.WebhookCallers.CA, gc.SecureServing); err != nil {
			return nil, err
		}
	} else {
		klog.Warningf("No --webhook-client-ca-file: the webhook endpoints %v refuse every caller that needs a client certificate", paths)
	}
	if x.AnonymousWebhooks {
		klog.Warningf("--anonymous-webhooks: the admission webhooks %v answer callers without a client certificate; "+
			"only a network policy keeps anyone else from them (%s still requires one)", admission.Paths, authz.Path)
		return func(h http.Handler) http.Handler { return h }, nil
	}
	return x.WebhookCallers.Require, nil
}
