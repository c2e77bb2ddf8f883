package kindcontroller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/servedgroup"
)

// errNotYet says a configured kind is not (yet) served by the host: its CRD
// does not exist, or its schema is not published yet. It is retried.
type errNotYet struct{ reason string }

func (e errNotYet) Error() string { return e.reason }

// IsNotYet reports whether err says a kind does not exist in the host yet.
func IsNotYet(err error) bool {
	var n errNotYet
	return errors.As(err, &n)
}

// resolved is what the host says of a configured kind.
type resolved struct {
	names kinds.HostNames
	// models are the OpenAPI v3 schemas of the source's group version.
	models servedgroup.HostSchemas
	// fingerprint changes whenever what is served of the kind changes: its
	// schema, its printer columns, its names.
	fingerprint string
	// fromCRD: the columns were read from the kind's
	// CustomResourceDefinition; false when there was none to read (a
	// built-in or aggregated kind, or a CRD not found or not readable now).
	fromCRD bool
}

// CheckResource checks a configured kind against the host's discovery: it
// must be namespaced and support list and watch. A kind the host does not
// serve yet is IsNotYet: it is served once it appears.
func CheckResource(dc discovery.DiscoveryInterface, gvr schema.GroupVersionResource) (metav1.APIResource, error) {
	list, err := dc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return metav1.APIResource{}, errNotYet{fmt.Sprintf("the host cluster does not serve %s (no such group version yet)", gvr.GroupVersion())}
	}
	if err != nil {
		return metav1.APIResource{}, fmt.Errorf("discovery of %s: %w", gvr.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Name != gvr.Resource {
			continue
		}
		var problems []string
		if !r.Namespaced {
			problems = append(problems, "is cluster-scoped: only namespaced kinds have views")
		}
		for _, verb := range []string{"list", "watch"} {
			if !slices.Contains(r.Verbs, verb) {
				problems = append(problems, "does not support "+verb)
			}
		}
		if len(problems) > 0 {
			return r, fmt.Errorf("%s %s", gvr.GroupResource(), joinProblems(problems))
		}
		return r, nil
	}
	return metav1.APIResource{}, errNotYet{fmt.Sprintf("the host cluster does not serve %s in %s yet", gvr.Resource, gvr.GroupVersion())}
}

func joinProblems(ps []string) string {
	out := ps[0]
	for _, p := range ps[1:] {
		out += " and " + p
	}
	return out
}

// resolve reads what the host says of a configured kind: its names from
// discovery, its schema from OpenAPI v3 and, for a custom resource, its
// printer columns from its CustomResourceDefinition.
func resolve(ctx context.Context, dc discovery.DiscoveryInterface, dyn dynamic.Interface, cache *schemaCache, gvr schema.GroupVersionResource) (resolved, error) {
	r, err := CheckResource(dc, gvr)
	if err != nil {
		return resolved{}, err
	}
	shared, err := cache.fetch(ctx, dc, []schema.GroupVersion{gvr.GroupVersion()})
	if err != nil {
		return resolved{}, errNotYet{fmt.Sprintf("the host cluster publishes no OpenAPI schema of %s yet: %v", gvr.GroupVersion(), err)}
	}
	// The cache's schemas are shared: the list model is added to a copy.
	models := make(servedgroup.HostSchemas, len(shared)+1)
	for n, s := range shared {
		models[n] = s
	}
	gvk := gvr.GroupVersion().WithKind(r.Kind)
	model := ModelOf(models, gvk)
	if model == "" {
		return resolved{}, errNotYet{fmt.Sprintf("the host cluster's OpenAPI of %s has no schema of kind %s yet", gvr.GroupVersion(), r.Kind)}
	}
	if _, ok := models[model+"List"]; !ok {
		// Custom resources' documents have no list model: the view's list
		// is described the way every Kubernetes list is.
		models[model+"List"] = servedgroup.ListSchema(model, gvr.GroupVersion().WithKind(r.Kind+"List"))
	}
	singular := r.SingularName
	if singular == "" {
		singular = r.Kind
	}
	columns, fromCRD, err := printerColumns(ctx, dyn, gvr)
	if err != nil {
		return resolved{}, err
	}
	out := resolved{
		names: kinds.HostNames{
			Kind:     r.Kind,
			Singular: strings.ToLower(singular),
			Model:    model,
			Columns:  columns,
		},
		models:  models,
		fromCRD: fromCRD,
	}
	out.fingerprint, err = fingerprint(gvr, out.names, models)
	return out, err
}

// ModelOf returns the name of the model whose group-version-kind extension is gvk.
func ModelOf(h servedgroup.HostSchemas, gvk schema.GroupVersionKind) string {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		ext, ok := h[name].Extensions["x-kubernetes-group-version-kind"].([]any)
		if !ok {
			continue
		}
		for _, e := range ext {
			m, ok := e.(map[string]any)
			if ok && m["group"] == gvk.Group && m["version"] == gvk.Version && m["kind"] == gvk.Kind {
				return name
			}
		}
	}
	return ""
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// printerColumns returns the additionalPrinterColumns of gvr's version in its
// CustomResourceDefinition; none for a kind that has none, or no CRD.
// fromCRD reports whether the CRD was read: a CRD not found (a built-in or
// aggregated kind, or a CRD deleted while discovery still lists it) or not
// readable gives no columns and false.
func printerColumns(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource) (_ []kinds.PrinterColumn, fromCRD bool, _ error) {
	if dyn == nil {
		return nil, false, nil
	}
	crd, err := dyn.Resource(crdResource).Get(ctx, gvr.Resource+"."+gvr.Group, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return nil, false, nil // a built-in or aggregated kind; or columns we may not read
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading the CustomResourceDefinition of %s: %w", gvr.GroupResource(), err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		vm, ok := v.(map[string]any)
		if !ok || vm["name"] != gvr.Version {
			continue
		}
		raw, _ := vm["additionalPrinterColumns"].([]any)
		var out []kinds.PrinterColumn
		for _, c := range raw {
			cm, ok := c.(map[string]any)
			if !ok {
				continue
			}
			col := kinds.PrinterColumn{}
			col.Name, _ = cm["name"].(string)
			col.Type, _ = cm["type"].(string)
			col.Format, _ = cm["format"].(string)
			col.Description, _ = cm["description"].(string)
			col.JSONPath, _ = cm["jsonPath"].(string)
			if p, ok := cm["priority"].(int64); ok {
				col.Priority = int32(p)
			}
			if col.Name == "" || col.JSONPath == "" {
				continue
			}
			out = append(out, col)
		}
		return out, true, nil
	}
	return nil, true, nil
}

// fingerprint hashes what is served of a kind.
func fingerprint(source schema.GroupVersionResource, host kinds.HostNames, models servedgroup.HostSchemas) (string, error) {
	h := sha256.New()
	enc := json.NewEncoder(h)
	if err := enc.Encode(source); err != nil {
		return "", err
	}
	if err := enc.Encode(host); err != nil {
		return "", err
	}
	names := make([]string, 0, len(models))
	for n := range models {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := enc.Encode(n); err != nil {
			return "", err
		}
		if err := enc.Encode((*spec.Schema)(models[n])); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
