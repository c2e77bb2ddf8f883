package kinds

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// Spec is a kind as a configuration file lists it, before validation.
type Spec struct {
	Source          schema.GroupVersionResource
	Strategy        string
	GlobalNamespace string
	Delivery        string
	AggregateTo     []string
}

// aggregationRoles are the default roles a view's read access may be
// aggregated into.
var aggregationRoles = []string{"view", "edit", "admin"}

// Configure validates a configured kind and returns it, with the built-in
// kind's presentation when its source is one. Every problem is returned, in
// words a user fixing the file can act on; the kind is valid when none is.
// Whether the host serves the kind is checked later, against its discovery.
func Configure(s Spec) (Kind, []string) {
	gvr := s.Source
	var problems []string
	if gvr.Version == "" {
		problems = append(problems, "version is required")
	} else if msgs := validation.IsDNS1035Label(gvr.Version); len(msgs) > 0 {
		problems = append(problems, fmt.Sprintf("version %q: %s", gvr.Version, strings.Join(msgs, ", ")))
	}
	if gvr.Resource == "" {
		problems = append(problems, "resource is required")
	} else if msgs := validation.IsDNS1123Subdomain(gvr.Resource); len(msgs) > 0 || strings.Contains(gvr.Resource, ".") {
		problems = append(problems, fmt.Sprintf("resource %q: want a plural resource name such as rolebindings", gvr.Resource))
	}
	if gvr.Group != "" {
		if msgs := validation.IsDNS1123Subdomain(gvr.Group); len(msgs) > 0 {
			problems = append(problems, fmt.Sprintf("group %q: %s", gvr.Group, strings.Join(msgs, ", ")))
		}
	}
	if gvr.Group == "" && gvr.Resource == "secrets" {
		// Every tenant that may read views would read every global
		// Secret's data: inheritance is for policy, not credentials.
		problems = append(problems, "secrets can't be served: a view would show every inherited Secret's data to every tenant that may read views")
	}
	if gvr.Group == v1alpha1.GroupName {
		problems = append(problems, fmt.Sprintf("group %s is implicit-apiserver's own: views can't be sources", v1alpha1.GroupName))
	}
	if s.GlobalNamespace != "" {
		if msgs := validation.IsDNS1123Label(s.GlobalNamespace); len(msgs) > 0 {
			problems = append(problems, fmt.Sprintf("globalNamespace %q: %s", s.GlobalNamespace, strings.Join(msgs, ", ")))
		}
	}
	k, isBuiltIn := BuiltIn(gvr)
	if isBuiltIn && len(s.AggregateTo) > 0 {
		problems = append(problems, "aggregateTo is for configured kinds: a built-in view's readers are fixed "+
			"(RoleBindings and Roles: admin; NetworkPolicies: view, edit and admin)")
	}
	for j, role := range s.AggregateTo {
		if !slices.Contains(aggregationRoles, role) {
			problems = append(problems, fmt.Sprintf("aggregateTo[%d] %q: want one of %s", j, role, strings.Join(aggregationRoles, ", ")))
		} else if slices.Contains(s.AggregateTo[:j], role) {
			problems = append(problems, fmt.Sprintf("aggregateTo[%d] %q: listed twice", j, role))
		}
	}
	strategy := merge.Replace
	switch s.Strategy {
	case "", string(merge.Replace):
	case string(merge.Overlay):
		strategy = merge.Overlay
	default:
		problems = append(problems, fmt.Sprintf("strategy %q: want Replace or Overlay", s.Strategy))
	}
	delivery := DeliveryView
	switch Delivery(s.Delivery) {
	case "", DeliveryView:
	case DeliveryMaterialize:
		delivery = DeliveryMaterialize
	default:
		problems = append(problems, fmt.Sprintf("delivery %q: want %s (the default: views only) or %s (views, and their inherited items written as real objects into each tenant namespace)",
			s.Delivery, DeliveryView, DeliveryMaterialize))
	}
	if len(problems) > 0 {
		return Kind{}, problems
	}
	if !isBuiltIn {
		k = Kind{Source: gvr}
	}
	k.Strategy, k.GlobalNamespace, k.Delivery, k.AggregateTo = strategy, s.GlobalNamespace, delivery, s.AggregateTo
	return k, nil
}
