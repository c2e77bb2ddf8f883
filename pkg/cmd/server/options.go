package server

import (
	"context"
	"fmt"
	"net"
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
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/util/compatibility"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/klog/v2"
	"k8s.io/kube-openapi/pkg/common"
	netutils "k8s.io/utils/net"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/apiserver"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
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
	// WebhookConfiguration names the ValidatingWebhookConfiguration whose
	// match conditions the server keeps current; "" turns that off.
	WebhookConfiguration string
	// GlobalKubeconfig reaches the hub cluster the global namespace is read
	// from; GlobalClusterName names it in provenance.
	GlobalKubeconfig  string
	GlobalClusterName string

	// config is set by Complete from ConfigFile or the defaults.
	config Configuration
}

// NewOptions returns the default options.
func NewOptions() *Options {
	rec := genericoptions.NewRecommendedOptions("", nil)
	// Views are computed from the host cluster's objects: no etcd of our own,
	// and nothing to admit since views are read-only.
	rec.Etcd = nil
	rec.Admission = nil
	rec.SecureServing.BindPort = 6443
	// kube-apiserver calls admission webhooks without credentials; the
	// guards only read and answer for the request they are given.
	rec.Authorization.AlwaysAllowPaths = append(rec.Authorization.AlwaysAllowPaths, admission.Paths...)
	// The same for the authorization webhook: it answers only the question
	// it is asked (restrict who reaches the port, see docs/security.md).
	rec.Authorization.AlwaysAllowPaths = append(rec.Authorization.AlwaysAllowPaths, authz.Path)
	return &Options{
		WebhookConfiguration: "implicit-apiserver",
		Recommended:          rec,
		GlobalNamespace:      "implicit-global",
		ExcludeNamespaces:    []string{"kube-system", "kube-public", "kube-node-lease"},
		HostSchemaTimeout:    2 * time.Minute,
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
	fs.StringVar(&o.GlobalKubeconfig, "global-kubeconfig", o.GlobalKubeconfig,
		"Kubeconfig of the hub cluster whose global namespace holds the global sources. Empty: the global namespace of this cluster.")
	fs.StringVar(&o.GlobalClusterName, "global-cluster-name", o.GlobalClusterName,
		"The hub cluster's name, in the implicit.dev/source-cluster annotation of the items it provides. Required with --global-kubeconfig.")
	fs.StringVar(&o.WebhookConfiguration, "webhook-configuration", o.WebhookConfiguration,
		"The ValidatingWebhookConfiguration of the guards whose match conditions (locked names, inherited namespaces) "+
			"the server keeps current. Empty: don't.")

	o.Recommended.SecureServing.AddFlags(fss.FlagSet("secure serving"))
	o.Recommended.Authentication.AddFlags(fss.FlagSet("authentication"))
	o.Recommended.Authorization.AddFlags(fss.FlagSet("authorization"))
	o.Recommended.CoreAPI.AddFlags(fss.FlagSet("host cluster"))
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
	if o.GlobalKubeconfig != "" && len(o.config.Globals) > 0 {
		errs = append(errs, fmt.Errorf("--config: a kind's own globalNamespace is not supported with --global-kubeconfig: the hub's global namespace is the global scope of every kind"))
	}
	if o.HostSchemaTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--host-schema-timeout must be positive"))
	}
	return utilerrors.NewAggregate(errs)
}

// Config builds the server configuration. It reads the source kinds'
// schemas from the host cluster, waiting up to HostSchemaTimeout for it.
func (o *Options) Config(ctx context.Context) (*apiserver.Config, error) {
	if err := o.Recommended.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("creating self-signed certificates: %w", err)
	}
	scheme := apiserver.NewScheme(o.config.Kinds)
	codecs := apiserver.NewCodecs(scheme)

	gc := genericapiserver.NewRecommendedConfig(codecs)
	gc.EffectiveVersion = compatibility.DefaultBuildEffectiveVersion()
	// The host's schemas are read once the host client exists, after
	// ApplyTo. The v2 definitions are rendered when the server starts; the v3
	// configuration renders them when it is made, so it is made last.
	var host apiserver.HostSchemas
	namer := openapinamer.NewDefinitionNamer(scheme)
	gc.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(func(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
		return host.Definitions(namer.GetDefinitionName)(ref)
	}, namer)
	gc.OpenAPIConfig.Info.Title = "implicit-apiserver"
	gc.OpenAPIConfig.Info.Version = apiserver.SchemeGroupVersion.Version

	if err := o.Recommended.ApplyTo(gc); err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(gc.ClientConfig)
	if err != nil {
		return nil, fmt.Errorf("host cluster client: %w", err)
	}
	host, err = waitForHostSchemas(ctx, client.Discovery(), o.config.Kinds, o.HostSchemaTimeout)
	if err != nil {
		return nil, err
	}
	if err := CheckResources(client.Discovery(), o.config.Resources); err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(gc.ClientConfig)
	if err != nil {
		return nil, fmt.Errorf("host cluster client: %w", err)
	}
	gc.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(host.Definitions(namer.GetDefinitionName), namer)
	gc.OpenAPIV3Config.Info.Title = "implicit-apiserver"
	gc.OpenAPIV3Config.Info.Version = apiserver.SchemeGroupVersion.Version

	var hub *apiserver.HubConfig
	if o.GlobalKubeconfig != "" {
		if hub, err = o.hubConfig(); err != nil {
			return nil, err
		}
	}
	excluded := map[string]bool{}
	for _, ns := range o.ExcludeNamespaces {
		excluded[ns] = true
	}
	// A kind's own global namespace holds global sources: never a tenant.
	for _, ns := range o.config.Globals {
		if ns != o.GlobalNamespace {
			excluded[ns] = true
		}
	}
	return &apiserver.Config{
		GenericConfig: gc,
		ExtraConfig: apiserver.ExtraConfig{
			Kinds:                o.config.Kinds,
			Strategies:           o.config.Strategies,
			Globals:              o.config.Globals,
			Resources:            o.config.Resources,
			HostSchemas:          host,
			Namer:                namer.GetDefinitionName,
			Overlayer:            merge.NewOverlayer,
			Dynamic:              dyn,
			Policy:               merge.Policy{GlobalNamespace: o.GlobalNamespace, Excluded: excluded},
			Scheme:               scheme,
			Codecs:               codecs,
			Client:               client,
			Informers:            gc.SharedInformerFactory,
			WebhookConfiguration: o.WebhookConfiguration,
			Hub:                  hub,
		},
	}, nil
}

func waitForHostSchemas(ctx context.Context, dc discovery.DiscoveryInterface, kinds []registry.Kind, timeout time.Duration) (apiserver.HostSchemas, error) {
	gvs := sets.New[schema.GroupVersion]()
	for _, k := range kinds {
		gvs.Insert(k.Source.GroupVersion())
	}
	var host apiserver.HostSchemas
	var last error
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		host, last = apiserver.FetchHostSchemas(ctx, dc, gvs.UnsortedList())
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
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("hub cluster client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("hub cluster client: %w", err)
	}
	return &apiserver.HubConfig{
		Name:      o.GlobalClusterName,
		Client:    client,
		Dynamic:   dyn,
		Informers: informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(o.GlobalNamespace)),
	}, nil
}
