package materialize

import (
	"context"
	"fmt"
	"net/http"
	"path"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// Protobuf reads and writes the copies of the built-in kinds in protobuf
// (issue 45): a dynamic client speaks JSON only, and encoding each copy to
// JSON and decoding the answer and the copies' watch events from it cost
// more of implicit-apiserver's CPU per write than the rest of the write.
// The copies stay unstructured inside the materializer: they are converted
// to the kind's Go type (client-go's scheme) for the write, and each write
// asks only for the copy's metadata back (PartialObjectMetadata), which is
// all the materializer keeps of it. Kinds client-go does not know (custom
// resources) are read and written by the dynamic client as before.
type Protobuf struct {
	scheme *runtime.Scheme
	// writer writes the copies; its answers are PartialObjectMetadata.
	writer rest.Interface
	// informers are the copies' informers' factory, in protobuf.
	client kubernetes.Interface
}

// acceptMetadata asks a write's answer as the written object's metadata.
const acceptMetadata = runtime.ContentTypeProtobuf + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
	runtime.ContentTypeJSON + ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

// NewProtobuf returns the protobuf transport over cfg and its HTTP client
// hc (the dynamic client's, so that both share a connection; give cfg a
// RateLimiter for both to share one limit).
func NewProtobuf(cfg *rest.Config, hc *http.Client) (*Protobuf, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := metav1.AddMetaToScheme(s); err != nil {
		return nil, err
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	writer, err := rest.UnversionedRESTClientForConfigAndClient(c, hc)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfigAndClient(c, hc)
	if err != nil {
		return nil, err
	}
	return &Protobuf{scheme: s, writer: writer, client: client}, nil
}

// knows reports whether k's copies go in protobuf.
func (p *Protobuf) knows(k kinds.Kind) bool {
	return p != nil && k.Kind != "" && p.scheme.Recognizes(k.Source.GroupVersion().WithKind(k.Kind))
}

// informer returns an informer of k's copies (tweak selects them), typed,
// or nil when p does not know k.
func (p *Protobuf) informer(k kinds.Kind, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	if !p.knows(k) {
		return nil
	}
	gi, err := informers.NewSharedInformerFactoryWithOptions(p.client, 0, informers.WithTweakListOptions(tweak)).ForResource(k.Source)
	if err != nil {
		return nil
	}
	return gi.Informer()
}

// resource returns the client of k's copies in namespace: p's for a kind
// it knows (Get through dyn), dyn's otherwise.
func (p *Protobuf) resource(dyn dynamic.Interface, k kinds.Kind, namespace string) resourceClient {
	d := dyn.Resource(k.Source).Namespace(namespace)
	if !p.knows(k) {
		return d
	}
	prefix := "/apis/" + k.Source.Group
	if k.Source.Group == "" {
		prefix = "/api"
	}
	return &protoResource{
		p: p, gvk: k.Source.GroupVersion().WithKind(k.Kind), dyn: d,
		collection: path.Join(prefix, k.Source.Version, "namespaces", namespace, k.Source.Resource),
	}
}

// protoResource writes one kind's copies in one namespace in protobuf.
type protoResource struct {
	p          *Protobuf
	gvk        schema.GroupVersionKind
	collection string
	// dyn reads a whole object (rarely: a name held at the last look, or
	// a create's AlreadyExists) and deletes copies.
	dyn resourceClient
}

func (r *protoResource) Get(ctx context.Context, name string, opts metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error) {
	return r.dyn.Get(ctx, name, opts, sub...)
}

func (r *protoResource) Delete(ctx context.Context, name string, opts metav1.DeleteOptions, sub ...string) error {
	return r.dyn.Delete(ctx, name, opts, sub...)
}

func (r *protoResource) Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, _ ...string) (*unstructured.Unstructured, error) {
	return r.do(ctx, r.p.writer.Post().AbsPath(r.collection), obj, opts.FieldManager)
}

func (r *protoResource) Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, _ ...string) (*unstructured.Unstructured, error) {
	return r.do(ctx, r.p.writer.Put().AbsPath(r.collection, obj.GetName()), obj, opts.FieldManager)
}

// do sends obj as the kind's Go type and returns the answer's metadata.
func (r *protoResource) do(ctx context.Context, req *rest.Request, obj *unstructured.Unstructured, fieldManager string) (*unstructured.Unstructured, error) {
	typed, err := r.p.scheme.New(r.gvk)
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err != nil {
		return nil, fmt.Errorf("converting the copy %s to %s: %w", obj.GetName(), r.gvk.Kind, err)
	}
	typed.GetObjectKind().SetGroupVersionKind(r.gvk)
	if fieldManager != "" {
		req = req.Param("fieldManager", fieldManager)
	}
	var got metav1.PartialObjectMetadata
	if err := req.SetHeader("Accept", acceptMetadata).Body(typed).Do(ctx).Into(&got); err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetNamespace(got.Namespace)
	out.SetName(got.Name)
	out.SetUID(got.UID)
	out.SetResourceVersion(got.ResourceVersion)
	out.SetLabels(got.Labels)
	out.SetAnnotations(got.Annotations)
	return out, nil
}

// asUnstructured returns a copy as the materializer compares it: an
// informer of p's holds the kind's Go type.
func asUnstructured(o any) (*unstructured.Unstructured, bool) {
	switch t := o.(type) {
	case *unstructured.Unstructured:
		return t, true
	case runtime.Object:
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(t)
		if err != nil {
			return nil, false
		}
		return &unstructured.Unstructured{Object: content}, true
	}
	return nil, false
}
