package server

import (
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/implicit-dev/implicit-apiserver/pkg/kindcontroller"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// ImplicitConfiguration is the --config file (config.implicit.dev/v1alpha1).
type ImplicitConfiguration struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Resources  []ResourceSelector `json:"resources"`
}

// ResourceSelector names one served source kind.
type ResourceSelector struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
	// Strategy is Replace (the default) or Overlay.
	Strategy string `json:"strategy,omitempty"`
	// GlobalNamespace, when set, holds this kind's global sources instead
	// of --global-namespace. It is never a tenant.
	GlobalNamespace string `json:"globalNamespace,omitempty"`
	// AggregateTo names the default roles (view, edit, admin) that may read
	// this kind's view; empty means [admin]. The server never writes
	// ClusterRoles (that would let it escalate): the chart renders one
	// aggregated ClusterRole per kind from this field.
	AggregateTo []string `json:"aggregateTo,omitempty"`
	// Delivery is View (the default: the view only) or Materialize: the
	// view's inherited items are also written as real objects of the
	// source kind into each tenant namespace (pkg/materialize), for
	// engines that read only real objects.
	Delivery string `json:"delivery,omitempty"`
}

// Configuration is what an ImplicitConfiguration serves: the kinds it
// lists, in order. A built-in kind it lists is served from its Go type
// (kinds.Kind.Typed); every other kind from unstructured objects once the
// host serves it.
type Configuration struct {
	Kinds []kinds.Kind
}

// DefaultConfiguration serves the three default kinds with Replace.
func DefaultConfiguration() Configuration {
	return Configuration{Kinds: kinds.BuiltIns()}
}

// globalNamespaces are the kinds' own global namespaces.
func (c Configuration) globalNamespaces() []string {
	var out []string
	for _, k := range c.Kinds {
		if k.GlobalNamespace != "" {
			out = append(out, k.GlobalNamespace)
		}
	}
	return out
}

// materialized reports whether a kind is delivered as real objects.
func (c Configuration) materialized() bool {
	for _, k := range c.Kinds {
		if k.Materialized() {
			return true
		}
	}
	return false
}

// LoadConfiguration reads an ImplicitConfiguration. Unknown fields,
// duplicates and malformed entries are errors, all reported at once; whether
// each kind exists, is namespaced and can be listed and watched is checked
// against the host cluster later (CheckResources).
func LoadConfiguration(path string) (Configuration, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Configuration{}, fmt.Errorf("--config: %w", err)
	}
	return ParseConfiguration(raw, "--config "+path)
}

// ParseConfiguration is LoadConfiguration of a file's bytes; name says
// where they come from in errors ("--config path" for the server's flag).
// kubectl implicit test and diff read a directory's configuration with it.
func ParseConfiguration(raw []byte, name string) (Configuration, error) {
	var cfg ImplicitConfiguration
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		return Configuration{}, fmt.Errorf("%s: %w", name, err)
	}
	var errs []error
	if cfg.APIVersion != "config.implicit.dev/v1alpha1" || cfg.Kind != "ImplicitConfiguration" {
		errs = append(errs, fmt.Errorf("apiVersion/kind is %q/%q, want config.implicit.dev/v1alpha1/ImplicitConfiguration", cfg.APIVersion, cfg.Kind))
	}
	if len(cfg.Resources) == 0 {
		errs = append(errs, fmt.Errorf("resources: at least one is required"))
	}
	var out Configuration
	seen := map[string]int{}
	for i, r := range cfg.Resources {
		gvr := schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
		k, problems := kinds.Configure(kinds.Spec{
			Source: gvr, Strategy: r.Strategy, GlobalNamespace: r.GlobalNamespace, Delivery: r.Delivery, AggregateTo: r.AggregateTo,
		})
		if j, ok := seen[r.Resource]; ok && r.Resource != "" {
			problems = append(problems, fmt.Sprintf("resource %s is listed twice (resources[%d]): views are named by resource, so one source kind per plural name", r.Resource, j))
		}
		if len(problems) > 0 {
			errs = append(errs, fmt.Errorf("resources[%d] (%s): %s", i, gvr, strings.Join(problems, "; ")))
			continue
		}
		seen[r.Resource] = i
		out.Kinds = append(out.Kinds, k)
	}
	if len(errs) > 0 {
		return Configuration{}, fmt.Errorf("%s: %w", name, utilerrors.NewAggregate(errs))
	}
	return out, nil
}

// CheckResources checks the configured kinds that are not built in against
// the host's discovery: a kind that is cluster-scoped or can't be listed or
// watched is an error, all reported at once. A kind the host does not serve
// yet is not: it is served once it appears.
func CheckResources(dc discovery.DiscoveryInterface, ks []kinds.Kind) error {
	var errs []error
	for _, r := range ks {
		if r.Typed() {
			continue
		}
		if _, err := kindcontroller.CheckResource(dc, r.Source); err != nil {
			if kindcontroller.IsNotYet(err) {
				klog.InfoS("Configured kind not served by the host yet: its view appears once it is", "resource", r.Source.String(), "reason", err.Error())
				continue
			}
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("--config: %w", utilerrors.NewAggregate(errs))
	}
	return nil
}
