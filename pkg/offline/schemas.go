package offline

import (
	"fmt"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	smdtyped "sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/implicit-dev/implicit-apiserver/pkg/kindcontroller"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/servedgroup"
)

// The server merges overlays with merge.NewOverlayer over the schemas the
// host publishes (OpenAPI v3 of each group version). Offline, the same
// pkg/merge overlayer is built over the schemas those documents hold:
//
//   - a built-in kind: client-go's embedded structured-merge-diff schema of
//     the built-in types (applyconfigurations.NewTypeConverter), generated
//     from the same OpenAPI kube-apiserver publishes;
//   - a custom resource: the OpenAPI v3 document kube-apiserver would
//     publish for its CustomResourceDefinition in the files
//     (apiextensions-apiserver's builder.BuildOpenAPIV3, which kube-apiserver's
//     OpenAPI v3 controller calls), then merge.NewOverlayer, as the kind
//     controller does with the host's document.

var (
	builtInTypes     managedfields.TypeConverter
	builtInTypesOnce sync.Once
)

// builtInOverlayer is the overlayer of a built-in kind.
func builtInOverlayer(k kinds.Kind) (merge.Overlayer, error) {
	builtInTypesOnce.Do(func() { builtInTypes = applyconfigurations.NewTypeConverter(scheme.Scheme) })
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(k.Source.GroupVersion().WithKind(k.Kind))
	tv, err := builtInTypes.ObjectToTyped(u)
	if err != nil {
		return nil, fmt.Errorf("overlays of %s: no built-in schema: %w", k.Source, err)
	}
	return merge.NewOverlayerForType(smdtyped.ParseableType{Schema: tv.Schema(), TypeRef: tv.TypeRef()})
}

// crdModels are the OpenAPI v3 schemas kube-apiserver publishes for the
// version of a CustomResourceDefinition, by component name, and the kind's
// model name among them.
func crdModels(crd *unstructured.Unstructured, k kinds.Kind) (servedgroup.HostSchemas, string, error) {
	var c apiextensionsv1.CustomResourceDefinition
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(crd.Object, &c); err != nil {
		return nil, "", fmt.Errorf("CustomResourceDefinition %s: %w", crd.GetName(), err)
	}
	doc, err := builder.BuildOpenAPIV3(&c, k.Source.Version, builder.Options{IncludeSelectableFields: true})
	if err != nil {
		return nil, "", fmt.Errorf("CustomResourceDefinition %s: the OpenAPI schema of %s: %w", crd.GetName(), k.Source.Version, err)
	}
	if doc.Components == nil {
		return nil, "", fmt.Errorf("CustomResourceDefinition %s: no schemas for %s", crd.GetName(), k.Source.Version)
	}
	models := servedgroup.HostSchemas(doc.Components.Schemas)
	gvk := k.Source.GroupVersion().WithKind(c.Spec.Names.Kind)
	model := kindcontroller.ModelOf(models, gvk)
	if model == "" {
		return nil, "", fmt.Errorf("CustomResourceDefinition %s: no schema of %s", crd.GetName(), gvk)
	}
	return models, model, nil
}
