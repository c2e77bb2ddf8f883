package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// Previewer previews edits of sources: *answers.Answers.
type Previewer interface {
	// SourceExists reports whether the source namespace/name of resource exists.
	SourceExists(resource, namespace, name string) (bool, error)
	// Preview tells what the views would show if the source became obj (nil: deleted).
	Preview(resource, namespace, name string, obj runtime.Object) (v1alpha1.PreviewStatus, error)
	// EmptyObject returns an empty source object of resource.
	EmptyObject(resource string) runtime.Object
	// PreviewNamespace tells what the views of resource in ns and its
	// subtree would show if ns had ns's labels and annotations.
	PreviewNamespace(resource string, ns *corev1.Namespace) (v1alpha1.PreviewStatus, error)
}

// PreviewStorage serves previews.implicit.dev, a create-only review in the
// namespace of a source: what an edit of it (create, update or delete) would
// change in the views, namespace by namespace. The requester must be allowed
// the edit itself (create, update or delete of the source, checked as a
// SubjectAccessReview of the host would). The answer names a namespace the
// edit reaches, and the sources of its view item, only when the requester
// may get that view item there (as an explanation needs): the edit's author
// need not read its children, which may have shadowed or excluded what made
// it their reader. The others are counted in status.hidden.
type PreviewStorage struct {
	review
	src   Previewer
	authz authorizer.UnconditionalAuthorizer
	kinds func() []kinds.Kind
}

var (
	_ rest.Storage              = &PreviewStorage{}
	_ rest.Creater              = &PreviewStorage{}
	_ rest.Scoper               = &PreviewStorage{}
	_ rest.KindProvider         = &PreviewStorage{}
	_ rest.SingularNameProvider = &PreviewStorage{}
)

// NewPreviewStorage returns the storage of previews; kinds returns the view
// kinds served now.
func NewPreviewStorage(src Previewer, authz authorizer.UnconditionalAuthorizer, kinds func() []kinds.Kind) *PreviewStorage {
	return &PreviewStorage{review: review{newObject: func() runtime.Object { return &v1alpha1.Preview{} }, kind: "Preview", singular: "preview"}, src: src, authz: authz, kinds: kinds}
}

// Create implements rest.Creater: it answers the review in the status.
func (s *PreviewStorage) Create(ctx context.Context, obj runtime.Object, validate rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	in, ok := obj.(*v1alpha1.Preview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a Preview: %T", obj))
	}
	ns, ok := genericapirequest.NamespaceFrom(ctx)
	if !ok || ns == "" {
		return nil, apierrors.NewBadRequest("a namespace is required")
	}
	resource := strings.ToLower(in.Spec.Resource)
	if resource == "" {
		return nil, apierrors.NewBadRequest("spec.resource is required")
	}
	if (in.Spec.Object == nil) == (in.Spec.Delete == "") {
		return nil, apierrors.NewBadRequest("set exactly one of spec.object (create or update) and spec.delete (the name of a source to delete)")
	}
	var kind *kinds.Kind
	for _, k := range s.kinds() {
		if k.Resource() == resource {
			kind = &k
			break
		}
	}
	if kind == nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.resource: implicit.dev serves no view %q", resource))
	}
	source := kind.Source.GroupResource()
	if ns, ok, err := proposedNamespace(in.Spec.Object); ok || err != nil {
		if err != nil {
			return nil, err
		}
		return s.previewNamespace(ctx, in, resource, ns, validate)
	}

	var next runtime.Object
	name := in.Spec.Delete
	if in.Spec.Object != nil {
		var err error
		if next, name, err = s.proposed(*kind, ns, in.Spec.Object); err != nil {
			return nil, err
		}
	}
	if err := validateNamed(resource, name, "spec"); err != nil {
		return nil, err
	}
	exists, err := s.src.SourceExists(resource, ns, name)
	if err != nil {
		return nil, err
	}
	// The access review of the edit, as kube-apiserver would authorize it: a
	// create names no object.
	verb, reviewName := "create", ""
	switch {
	case next == nil && !exists:
		// Deleting what does not exist reveals nothing either way, once
		// the requester may delete it.
		if err := allowed(ctx, s.authz, source, "delete", ns, name); err != nil {
			return nil, err
		}
		return nil, apierrors.NewNotFound(source, name)
	case next == nil:
		verb, reviewName = "delete", name
	case exists:
		verb, reviewName = "update", name
	}
	if err := allowed(ctx, s.authz, source, verb, ns, reviewName); err != nil {
		if next != nil && !apierrors.IsUnauthorized(err) {
			// Create or update was asked by whether the source exists;
			// one who may do neither must not learn which from the
			// refusal's words (kube-apiserver authorizes before it reads).
			return nil, apierrors.NewForbidden(source, name, fmt.Errorf("previewing this edit needs the permission to make it: create or update of %s %q in the namespace %q", source, name, ns))
		}
		return nil, err
	}
	if validate != nil {
		if err := validate(ctx, obj); err != nil {
			return nil, err
		}
	}
	st, err := s.src.Preview(resource, ns, name, next)
	if err != nil {
		return nil, err
	}
	if st, err = s.readable(ctx, resource, name, st); err != nil {
		return nil, err
	}
	return answered(in, ns, resource, st), nil
}

// answered is the Preview returned for in: made in namespace, for
// resource, with status st. Nothing is stored: no fields are managed.
func answered(in *v1alpha1.Preview, namespace, resource string, st v1alpha1.PreviewStatus) *v1alpha1.Preview {
	out := in.DeepCopy()
	out.Namespace = namespace
	out.ManagedFields = nil
	out.Spec.Resource = resource
	out.Status = st
	return out
}

// proposed reads the proposed object: JSON of the source kind, in namespace
// (or none), returned as the Go type of the kind's sources.
func (s *PreviewStorage) proposed(k kinds.Kind, namespace string, raw *runtime.RawExtension) (runtime.Object, string, error) {
	var content map[string]any
	data := raw.Raw
	if len(data) == 0 && raw.Object != nil {
		var err error
		if data, err = json.Marshal(raw.Object); err != nil {
			return nil, "", apierrors.NewBadRequest(fmt.Sprintf("spec.object: %v", err))
		}
	}
	if err := json.Unmarshal(data, &content); err != nil || content == nil {
		return nil, "", apierrors.NewBadRequest(fmt.Sprintf("spec.object must be a JSON object of kind %s: %v", k.Kind, err))
	}
	u := &unstructured.Unstructured{Object: content}
	if gv := k.Source.GroupVersion().String(); u.GetAPIVersion() != gv || u.GetKind() != k.Kind {
		return nil, "", apierrors.NewBadRequest(fmt.Sprintf("spec.object is %s %s; %s.implicit.dev previews %s %s",
			u.GetAPIVersion(), u.GetKind(), k.Resource(), gv, k.Kind))
	}
	if n := u.GetNamespace(); n != "" && n != namespace {
		return nil, "", apierrors.NewBadRequest(fmt.Sprintf("spec.object is in namespace %q; a preview is made in the source's namespace (%q)", n, namespace))
	}
	u.SetNamespace(namespace)
	empty := s.src.EmptyObject(k.Resource())
	if _, ok := empty.(*unstructured.Unstructured); ok || empty == nil {
		return u, u.GetName(), nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, empty); err != nil {
		return nil, "", apierrors.NewBadRequest(fmt.Sprintf("spec.object is not a valid %s: %v", k.Kind, err))
	}
	return empty, u.GetName(), nil
}

// MaxPreviewReviews is how many namespaces a preview asks the authorizer
// about, one access review each: a namespace past them is hidden, so a
// subtree of thousands of namespaces can't make one preview send thousands
// of SubjectAccessReviews. One who may get the view item in every namespace
// is asked once.
const MaxPreviewReviews = 256

// readable leaves out of st the namespaces whose view item name the
// requester may not get, counting them in st.Hidden: a view item names its
// namespace and the sources of its lineage, which its reader sees anyway.
func (s *PreviewStorage) readable(ctx context.Context, resource, name string, st v1alpha1.PreviewStatus) (v1alpha1.PreviewStatus, error) {
	view := v1alpha1.SchemeGroupVersion.WithResource(resource).GroupResource()
	err := allowed(ctx, s.authz, view, "get", "", name)
	switch {
	case err == nil:
		return st, nil
	case apierrors.IsUnauthorized(err):
		return st, err
	}
	may := map[string]bool{}
	hidden := map[string]bool{}
	visible := func(ns string) bool {
		ok, asked := may[ns]
		if !asked {
			ok = len(may) < MaxPreviewReviews && allowed(ctx, s.authz, view, "get", ns, name) == nil
			may[ns] = ok
		}
		if !ok {
			hidden[ns] = true
		}
		return ok
	}
	out := st
	out.Changed, out.Unchanged = nil, nil
	for _, c := range st.Changed {
		if visible(c.Namespace) {
			out.Changed = append(out.Changed, c)
		}
	}
	for _, u := range st.Unchanged {
		if visible(u.Namespace) {
			out.Unchanged = append(out.Unchanged, u)
		}
	}
	out.Hidden = len(hidden)
	return out, nil
}
