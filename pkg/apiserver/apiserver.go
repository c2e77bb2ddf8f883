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
	mux := watchmux.New(x.Policy, resources, views.NewObjects(newObject, 0), x.Watch)
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
		gr := SchemeGroupVersion.WithResource(k.Resource()).GroupResource()
		s := registry.NewStorage(GroupName, k, views.New(gr, mux))
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
		if !mux.HasSynced() {
			return fmt.Errorf("the namespaces and source objects have not all been read yet")
		}
		return nil
	})); err != nil {
		return nil, err
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

// Run serves until ctx is cancelled.
func (s *Server) Run(ctx context.Context) error {
	return s.GenericAPIServer.PrepareRun().RunWithContext(ctx)
}
