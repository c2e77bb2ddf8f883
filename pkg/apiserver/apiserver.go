package apiserver

import (
	"context"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// ExtraConfig is implicit-apiserver's own configuration.
type ExtraConfig struct {
	// Kinds are the served views.
	Kinds []registry.Kind
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
}

// HubConfig reaches the hub cluster of the global sources.
type HubConfig struct {
	Name      string
	Client    kubernetes.Interface
	Informers informers.SharedInformerFactory
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
	if err := mux.AddNamespaceInformer(nsInformer.Informer()); err != nil {
		return nil, err
	}

	storage := map[string]rest.Storage{}
	rejecters := map[string]*registry.Storage{}
	for _, k := range x.Kinds {
		gi, err := x.Informers.ForResource(k.Source)
		if err != nil {
			return nil, fmt.Errorf("no informer for %s: %w", k.Source, err)
		}
		if err := mux.AddSourceInformer(k.Resource(), gi.Informer()); err != nil {
			return nil, err
		}
		view := views.New(gr(k), mux)
		if x.Hub != nil {
			hi, err := x.Hub.Informers.ForResource(k.Source)
			if err != nil {
				return nil, fmt.Errorf("no informer for %s on the hub: %w", k.Source, err)
			}
			if err := mux.AddGlobalSourceInformer(k.Resource(), x.Hub.Name, hi.Informer()); err != nil {
				return nil, err
			}
			view.WithStaleness(hub.stale)
		}
		s := registry.NewStorage(GroupName, k, view)
		storage[k.Resource()] = s
		rejecters[k.Resource()] = s
	}

	c.GenericConfig.BuildHandlerChainFunc = func(h http.Handler, gc *genericapiserver.Config) http.Handler {
		return genericapiserver.DefaultBuildHandlerChain(readOnly(h, rejecters, x.Codecs), gc)
	}
	gs, err := c.GenericConfig.New("implicit-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}

	// The admission guards, on their own paths of the secure port.
	served := make([]schema.GroupResource, 0, len(x.Kinds))
	for _, k := range x.Kinds {
		served = append(served, k.Source.GroupResource())
	}
	var sar admission.Authorizer = admission.SARAuthorizer{}
	if x.Client != nil {
		sar = admission.SARAuthorizer{Client: x.Client.AuthorizationV1().SubjectAccessReviews()}
	}
	guards := admission.NewGuards(mux, sar, served, x.Policy.GlobalNamespace)
	for _, p := range admission.Paths {
		gs.Handler.NonGoRestfulMux.Handle(p, guards.Handler(p))
	}
	if x.Client != nil && x.WebhookConfiguration != "" {
		sync := &admission.ConditionSync{
			Client:          x.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations(),
			Kube:            x.Client,
			Name:            x.WebhookConfiguration,
			GlobalNamespace: x.Policy.GlobalNamespace,
			Source:          mux,
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
	gs.Handler.NonGoRestfulMux.Handle(authz.Path, authorizer.Handler())

	group := genericapiserver.NewDefaultAPIGroupInfo(GroupName, x.Scheme, metav1.ParameterCodec, x.Codecs)
	group.VersionedResourcesStorageMap[SchemeGroupVersion.Version] = storage
	if err := gs.InstallAPIGroup(&group); err != nil {
		return nil, fmt.Errorf("installing %s: %w", SchemeGroupVersion, err)
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

	reporter, err := views.NewHierarchyReporter(x.Policy, nsInformer)
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

// gr is the view's group and resource of kind k.
func gr(k registry.Kind) schema.GroupResource {
	return SchemeGroupVersion.WithResource(k.Resource()).GroupResource()
}

// Run serves until ctx is cancelled.
func (s *Server) Run(ctx context.Context) error {
	return s.GenericAPIServer.PrepareRun().RunWithContext(ctx)
}
