package servedgroup

import (
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	restful "github.com/emicklei/go-restful/v3"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapi "k8s.io/apiserver/pkg/endpoints"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry/answers"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// Group serves implicit.dev/v1alpha1 with the kinds served at the
// moment: kinds appear while the server runs (a CRD created after it
// started), so the group is not installed once into the generic server's
// go-restful container. Instead each change of the served kinds installs the
// whole group version, with k8s.io/apiserver's own installer, into a new
// container, which then replaces the previous one in one atomic swap; the
// group's discovery (plain and aggregated) and its OpenAPI v2 and v3
// documents are updated alongside, as k8s.io/apiextensions-apiserver does
// for custom resources. Requests in flight finish on the container they
// started on.
type Group struct {
	gs                *genericapiserver.GenericAPIServer
	scheme            *runtime.Scheme
	codecs            serializer.CodecFactory
	minRequestTimeout time.Duration
	// schemas are the host's schemas of the served kinds.
	schemas *schemaStore
	// openAPI returns the OpenAPI configurations of the served kinds: their
	// definitions come from the host's schemas of the source kinds.
	openAPI func() (*common.Config, *common.OpenAPIV3Config)

	// mu serializes Set.
	mu sync.Mutex
	// current is what is served; nil before the first Set.
	current atomic.Pointer[groupVersion]
	// groupAdded records that /apis lists the group.
	groupAdded bool
	// questions are the resources beside the views (hierarchies,
	// explanations, previews, rulesreviews), installed into every generation.
	questions map[string]rest.Storage
}

// Config is what a Group serves the views with.
type Config struct {
	// Scheme and Codecs hold the view types (NewScheme).
	Scheme *runtime.Scheme
	Codecs serializer.CodecFactory
	// MinRequestTimeout is the generic server's, for watches.
	MinRequestTimeout time.Duration
	// HostSchemas are the host's schemas of the built-in kinds.
	HostSchemas kinds.HostSchemas
	// OpenAPIV2 and OpenAPIV3 are the generic server's OpenAPI
	// configurations; with Namer (the scheme's), the group's documents
	// describe each served kind by the host's schema. Any nil: none.
	OpenAPIV2 *common.Config
	OpenAPIV3 *common.OpenAPIV3Config
	Namer     DefinitionNamer
}

// New returns a group that serves nothing until Install and Set.
func New(c Config) *Group {
	g := &Group{
		scheme:            c.Scheme,
		codecs:            c.Codecs,
		minRequestTimeout: c.MinRequestTimeout,
		schemas:           newSchemaStore(c.HostSchemas),
	}
	if v2, v3 := c.OpenAPIV2, c.OpenAPIV3; v2 != nil && v3 != nil && c.Namer != nil {
		g.openAPI = func() (*common.Config, *common.OpenAPIV3Config) {
			all, models := g.schemas.snapshot()
			namer := viewNamer(c.Namer, models)
			c2, c3 := *v2, *v3
			c2.GetDefinitions, c2.GetDefinitionName = Definitions(all, namer), namer
			c3.GetDefinitions, c3.GetDefinitionName, c3.Definitions = Definitions(all, namer), namer, nil
			return &c2, &c3
		}
	}
	return g
}

// Install serves the group on gs, with the resources that answer questions
// about the views read from mux beside the views; rules lists the inherited
// rules of a rules review (the authorization webhook's *authz.Authorizer).
func (g *Group) Install(gs *genericapiserver.GenericAPIServer, mux *watchmux.Mux, rules registry.RulesLister) {
	g.gs = gs
	g.questions = questions(mux, rules, gs.Authorizer, g.Kinds)
	gs.Handler.NonGoRestfulMux.Handle(genericapiserver.APIGroupPrefix+"/"+GroupName, g.groupHandler())
	gs.Handler.NonGoRestfulMux.HandlePrefix(genericapiserver.APIGroupPrefix+"/"+GroupName+"/", g)
}

// ReadOnly wraps the handler chain's inner handler: writes to a served view
// are refused naming the source to edit (readOnly).
func (g *Group) ReadOnly(next http.Handler) http.Handler {
	return readOnly(next, g.storage, g.codecs)
}

// Serving reports whether the group serves views yet (the first Set).
func (g *Group) Serving() bool { return g.current.Load() != nil }

// SetSchemas implements kinds.Group: the host's schemas of a kind served
// from unstructured objects, for the OpenAPI documents of the next Set.
func (g *Group) SetSchemas(resource string, models kinds.HostSchemas, model, kind string) {
	g.schemas.set(resource, models, model, kind)
}

// groupVersion is one generation of the served group version.
type groupVersion struct {
	container *restful.Container
	storage   map[string]*registry.Storage
	kinds     []registry.Kind
}

var _ kinds.Group = (*Group)(nil)

// ServeHTTP serves /apis/implicit.dev/v1alpha1/...: the current container.
func (g *Group) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	gv := g.current.Load()
	if gv == nil {
		err := apierrors.NewServiceUnavailable("implicit-apiserver is starting and serves no views yet")
		responsewriters.ErrorNegotiated(err, g.codecs, SchemeGroupVersion, w, req)
		return
	}
	gv.container.Dispatch(w, req)
}

// storage returns the served storage of resource, if any.
func (g *Group) storage(resource string) (*registry.Storage, bool) {
	gv := g.current.Load()
	if gv == nil {
		return nil, false
	}
	s, ok := gv.storage[resource]
	return s, ok
}

// Kinds returns the kinds served now.
func (g *Group) Kinds() []registry.Kind {
	if gv := g.current.Load(); gv != nil {
		return gv.kinds
	}
	return nil
}

// Sources returns the source resources of the kinds served now.
func (g *Group) Sources() []schema.GroupResource {
	kinds := g.Kinds()
	out := make([]schema.GroupResource, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k.Source.GroupResource())
	}
	return out
}

// Set serves kinds, each read from its viewer. It must be called after the
// generic server's PrepareRun, which creates the OpenAPI services it updates.
func (g *Group) Set(kinds []registry.Kind, viewers map[string]registry.Viewer) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	kinds = append([]registry.Kind(nil), kinds...)
	sort.SliceStable(kinds, func(i, j int) bool { return kinds[i].Resource() < kinds[j].Resource() })

	storage := map[string]*registry.Storage{}
	restStorage := map[string]rest.Storage{}
	served := map[string][]string{}
	for _, k := range kinds {
		v, ok := viewers[k.Resource()]
		if !ok {
			return fmt.Errorf("no view of %s", k.Resource())
		}
		s := registry.NewStorage(GroupName, k, v)
		storage[k.Resource()] = s
		restStorage[k.Resource()] = s
		served[k.Resource()] = []string{SchemeGroupVersion.String()}
	}
	for resource, q := range g.questions {
		if _, taken := restStorage[resource]; taken {
			klog.ErrorS(nil, "A configured kind takes the name of one of the group's own resources; serving the view", "resource", resource)
			continue
		}
		restStorage[resource] = q
		served[resource] = []string{SchemeGroupVersion.String()}
	}
	apiGV := &genericapi.APIGroupVersion{
		Root:                        genericapiserver.APIGroupPrefix,
		GroupVersion:                SchemeGroupVersion,
		Storage:                     restStorage,
		AllServedVersionsByResource: served,
		ParameterCodec:              metav1.ParameterCodec,
		Serializer:                  unstructuredSerializer{g.codecs},
		Typer:                       g.scheme,
		Creater:                     creater{scheme: g.scheme, kinds: kinds},
		Convertor:                   g.scheme,
		ConvertabilityChecker:       g.scheme,
		Defaulter:                   g.scheme,
		Namer:                       runtime.Namer(meta.NewAccessor()),
		UnsafeConvertor:             runtime.UnsafeObjectConvertor(g.scheme),
		// Views are read-only: no apply, no field manager at work.
		TypeConverter:              managedfields.NewDeducedTypeConverter(),
		EquivalentResourceRegistry: g.gs.EquivalentResourceRegistry,
		Authorizer:                 g.gs.Authorizer,
		MinRequestTimeout:          g.minRequestTimeout,
	}
	container := restful.NewContainer()
	container.Router(restful.CurlyRouter{})
	container.ServiceErrorHandler(func(serr restful.ServiceError, req *restful.Request, resp *restful.Response) {
		err := apierrors.NewGenericServerResponse(serr.Code, "", schema.GroupResource{}, "", serr.Message, 0, false)
		responsewriters.ErrorNegotiated(err, g.codecs, schema.GroupVersion{}, resp, req.Request)
	})
	resources, _, err := apiGV.InstallREST(container)
	if err != nil {
		return fmt.Errorf("installing %s: %w", SchemeGroupVersion, err)
	}

	if err := g.updateOpenAPI(container); err != nil {
		return err
	}
	g.current.Store(&groupVersion{container: container, storage: storage, kinds: kinds})

	g.gs.AggregatedDiscoveryGroupManager.AddGroupVersion(GroupName, apidiscoveryv2.APIVersionDiscovery{
		Version:   SchemeGroupVersion.Version,
		Resources: resources,
		Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
	})
	if !g.groupAdded {
		g.gs.AggregatedDiscoveryGroupManager.SetGroupVersionPriority(metav1.GroupVersion(SchemeGroupVersion), 1000, 100)
		g.gs.DiscoveryGroupManager.AddGroup(apiGroup())
		g.groupAdded = true
	}
	names := make([]string, 0, len(kinds))
	for _, k := range kinds {
		names = append(names, k.Resource())
	}
	klog.InfoS("Serving views", "groupVersion", SchemeGroupVersion.String(), "resources", names)
	return nil
}

// groupHandler serves /apis/implicit.dev: the group's versions.
func (g *Group) groupHandler() http.Handler {
	return discovery.NewAPIGroupHandler(g.codecs, apiGroup())
}

// apiGroup is the group's discovery: one version, preferred.
func apiGroup() metav1.APIGroup {
	version := metav1.GroupVersionForDiscovery{GroupVersion: SchemeGroupVersion.String(), Version: SchemeGroupVersion.Version}
	return metav1.APIGroup{Name: GroupName, Versions: []metav1.GroupVersionForDiscovery{version}, PreferredVersion: version}
}

// updateOpenAPI publishes the OpenAPI of the group served by container: v3
// per group version, v2 as the whole document.
func (g *Group) updateOpenAPI(container *restful.Container) error {
	if g.openAPI == nil {
		return nil // no OpenAPI configured
	}
	v2, v3 := g.openAPI()
	if g.gs.OpenAPIV3VersionedService != nil && v3 != nil {
		doc, err := builder3.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(container.RegisteredWebServices()), v3)
		if err != nil {
			return fmt.Errorf("building the OpenAPI v3 document of %s: %w", SchemeGroupVersion, err)
		}
		g.gs.OpenAPIV3VersionedService.UpdateGroupVersion("apis/"+SchemeGroupVersion.String(), doc)
	}
	if g.gs.OpenAPIVersionedService != nil && v2 != nil {
		services := append(g.gs.Handler.GoRestfulContainer.RegisteredWebServices(), container.RegisteredWebServices()...)
		doc, err := builder.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(services), v2)
		if err != nil {
			return fmt.Errorf("building the OpenAPI v2 document: %w", err)
		}
		if err := g.gs.OpenAPIVersionedService.UpdateSpec(doc); err != nil {
			return fmt.Errorf("publishing the OpenAPI v2 document: %w", err)
		}
	}
	return nil
}

// creater makes the objects k8s.io/apiserver's installer asks for: the
// scheme's, and for kinds served from unstructured objects an object that
// names its OpenAPI model (the host's model of the source kind), so the
// group's OpenAPI documents carry each kind's own schema.
type creater struct {
	scheme *runtime.Scheme
	kinds  []registry.Kind
}

func (c creater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	if gvk.GroupVersion() == SchemeGroupVersion {
		for _, k := range c.kinds {
			if !k.Unstructured() {
				continue
			}
			switch gvk.Kind {
			case k.Kind:
				return &modelSample{Unstructured: &unstructured.Unstructured{}, model: k.Model}, nil
			case k.Kind + "List":
				return &modelSample{Unstructured: &unstructured.Unstructured{}, model: k.Model + "List"}, nil
			}
		}
	}
	return c.scheme.New(gvk)
}

// modelSample stands for an unstructured kind in the installer's route
// documentation: OpenAPIModelName names its definition.
type modelSample struct {
	*unstructured.Unstructured
	model string
}

// OpenAPIModelName implements kube-openapi's model namer.
func (m modelSample) OpenAPIModelName() string { return m.model }

// questions returns the storage of the resources that answer questions about
// the views: hierarchies, explanations, previews and rules reviews.
func questions(mux *watchmux.Mux, rules registry.RulesLister, authz authorizer.UnconditionalAuthorizer, kinds func() []registry.Kind) map[string]rest.Storage {
	a := answers.New(mux)
	out := map[string]rest.Storage{
		v1alpha1.ResourceHierarchies:  registry.NewHierarchyStorage(a),
		v1alpha1.ResourceExplanations: registry.NewExplanationStorage(a, authz),
		v1alpha1.ResourcePreviews:     registry.NewPreviewStorage(a, authz, kinds),
		v1alpha1.ResourceRulesReviews: registry.NewRulesReviewStorage(rules, authz, watchmux.IsNotSynced),
	}
	// The audit of candidates, by the same authorizer (pkg/authz, audit.go).
	if au, ok := rules.(registry.AuditReader); ok {
		out[v1alpha1.ResourceCandidateAudits] = registry.NewCandidateAuditStorage(au, authz, watchmux.IsNotSynced)
	}
	return out
}
