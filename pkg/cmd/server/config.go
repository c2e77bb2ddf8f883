package server

import (
	"fmt"
	"os"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"sigs.k8s.io/yaml"

	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
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
}

// LoadConfiguration reads an ImplicitConfiguration and returns the kinds it
// serves. Unknown fields, duplicates and unsupported kinds are errors, all
// reported at once.
//
// This release serves the built-in kinds of registry.DefaultKinds with the
// Replace strategy; other kinds and Overlay are refused with a clear error
// rather than served half-way.
func LoadConfiguration(path string) ([]registry.Kind, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var cfg ImplicitConfiguration
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	var errs []error
	if cfg.APIVersion != "config.implicit.dev/v1alpha1" || cfg.Kind != "ImplicitConfiguration" {
		errs = append(errs, fmt.Errorf("apiVersion/kind is %q/%q, want config.implicit.dev/v1alpha1/ImplicitConfiguration", cfg.APIVersion, cfg.Kind))
	}
	if len(cfg.Resources) == 0 {
		errs = append(errs, fmt.Errorf("resources: at least one is required"))
	}
	known := map[string]registry.Kind{}
	for _, k := range registry.DefaultKinds() {
		known[k.Source.String()] = k
	}
	seen := map[string]bool{}
	var kinds []registry.Kind
	for i, r := range cfg.Resources {
		id := fmt.Sprintf("%s/%s, Resource=%s", r.Group, r.Version, r.Resource)
		if r.Group == "" {
			id = fmt.Sprintf("/%s, Resource=%s", r.Version, r.Resource)
		}
		switch {
		case r.Version == "" || r.Resource == "":
			errs = append(errs, fmt.Errorf("resources[%d]: version and resource are required", i))
			continue
		case seen[r.Resource]:
			errs = append(errs, fmt.Errorf("resources[%d]: %s is listed twice (views are named by resource)", i, r.Resource))
			continue
		case r.Strategy != "" && r.Strategy != "Replace" && r.Strategy != "Overlay":
			errs = append(errs, fmt.Errorf("resources[%d]: strategy %q: want Replace or Overlay", i, r.Strategy))
			continue
		case r.Strategy == "Overlay":
			errs = append(errs, fmt.Errorf("resources[%d]: strategy Overlay is not supported by this release", i))
			continue
		}
		seen[r.Resource] = true
		k, ok := known[id]
		if !ok {
			errs = append(errs, fmt.Errorf("resources[%d]: %s is not supported by this release (supported: rolebindings, roles, networkpolicies)", i, id))
			continue
		}
		kinds = append(kinds, k)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("--config %s: %w", path, utilerrors.NewAggregate(errs))
	}
	return kinds, nil
}
