package kinds

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// Delivery says how a kind's view reaches its readers.
type Delivery string

// The deliveries of a kind.
const (
	// DeliveryView serves the view only (the default).
	DeliveryView Delivery = "View"
	// DeliveryMaterialize also writes the view's inherited items as real
	// objects of the source kind into each tenant namespace
	// (pkg/materialize), for engines that read only real objects.
	DeliveryMaterialize Delivery = "Materialize"
)

// KindConfig describes one served kind: the source it is read from, how its
// sources merge and how its view is delivered. Its view is named by the
// source's resource, in implicit.dev/v1alpha1.
type KindConfig struct {
	// Source is the host's kind the view is made of.
	Source schema.GroupVersionResource
	// Strategy is how a lower scope's item meets an inherited one of the
	// same name (Replace by default).
	Strategy merge.Strategy
	// GlobalNamespace, when set, holds this kind's global sources instead
	// of the policy's global namespace. It is never a tenant.
	GlobalNamespace string
	// Delivery is DeliveryView ("" too) or DeliveryMaterialize.
	Delivery Delivery
	// AggregateTo names the default roles (view, edit, admin) that may read
	// the view of a kind that is not built in; the chart renders the
	// ClusterRole, the server never writes one.
	AggregateTo []string
	// Typed, for a built-in kind, is its view served from its Go type from
	// the start. Nil: the kind is served from unstructured objects once
	// the host serves it and publishes its schema (Controller).
	Typed *registry.Kind
}

// Resource is the view's resource: the source's.
func (k KindConfig) Resource() string { return k.Source.Resource }

// Materialized reports whether the view's items are also written as objects.
func (k KindConfig) Materialized() bool { return k.Delivery == DeliveryMaterialize }

// String describes a kind for logs and errors.
func (k KindConfig) String() string { return fmt.Sprintf("%s (%s)", k.Source, k.Strategy) }

// DefaultKinds are the built-in kinds: the views served from their Go types,
// and the ones served without a configuration file.
func DefaultKinds() []registry.Kind {
	return []registry.Kind{registry.RoleBindings(), registry.Roles(), registry.NetworkPolicies()}
}

// Defaults is the configuration without a file: the built-in kinds, each
// with the Replace strategy, the policy's global namespace and views only.
func Defaults() []KindConfig {
	builtIn := DefaultKinds()
	out := make([]KindConfig, 0, len(builtIn))
	for i := range builtIn {
		out = append(out, KindConfig{Source: builtIn[i].Source, Typed: &builtIn[i]})
	}
	return out
}

// BuiltIn returns the built-in kind of source, if source is one.
func BuiltIn(source schema.GroupVersionResource) (registry.Kind, bool) {
	for _, k := range DefaultKinds() {
		if k.Source == source {
			return k, true
		}
	}
	return registry.Kind{}, false
}

// Typed returns the kinds of ks served from their Go types, in order.
func Typed(ks []KindConfig) []registry.Kind {
	var out []registry.Kind
	for _, k := range ks {
		if k.Typed != nil {
			out = append(out, *k.Typed)
		}
	}
	return out
}
