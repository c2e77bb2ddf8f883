package registry

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// The preview of a Namespace: spec.object is a v1 Namespace named as the
// Preview's namespace, and the answer is how the views of spec.resource in
// it and its subtree would change with its labels and annotations, item by
// item. The requester must be allowed to update (or create) the namespace;
// a namespace's changes are shown where the requester may list the view.

var namespaces = schema.GroupResource{Resource: "namespaces"}

// proposedNamespace reads raw as a v1 Namespace; false when it is another kind.
func proposedNamespace(raw *runtime.RawExtension) (*corev1.Namespace, bool, error) {
	if raw == nil || len(raw.Raw) == 0 {
		return nil, false, nil
	}
	var tm struct{ APIVersion, Kind string }
	if err := json.Unmarshal(raw.Raw, &tm); err != nil || tm.APIVersion != "v1" || tm.Kind != "Namespace" {
		return nil, false, nil //nolint:nilerr // not a Namespace: read as the source kind
	}
	ns := &corev1.Namespace{}
	if err := json.Unmarshal(raw.Raw, ns); err != nil {
		return nil, true, apierrors.NewBadRequest(fmt.Sprintf("spec.object is not a valid Namespace: %v", err))
	}
	return ns, true, nil
}

func (s *PreviewStorage) previewNamespace(ctx context.Context, in *v1alpha1.Preview, resource string, ns *corev1.Namespace, validate rest.ValidateObjectFunc) (*v1alpha1.Preview, error) {
	namespace, _ := genericapirequest.NamespaceFrom(ctx)
	if ns.Name != namespace {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.object is the Namespace %q; a preview of a Namespace is made in that namespace (%q)", ns.Name, namespace))
	}
	// The edit is an update of the namespace, or its creation: one who
	// may only create namespaces previews a new one.
	updateErr := allowed(ctx, s.authz, namespaces, "update", "", ns.Name)
	if updateErr != nil && (apierrors.IsUnauthorized(updateErr) || allowed(ctx, s.authz, namespaces, "create", "", "") != nil) {
		return nil, updateErr
	}
	if validate != nil {
		if err := validate(ctx, in); err != nil {
			return nil, err
		}
	}
	st, err := s.src.PreviewNamespace(resource, ns)
	if err != nil {
		return nil, err
	}
	if updateErr != nil && st.Operation != v1alpha1.OperationCreate {
		return nil, updateErr
	}
	if st, err = s.listable(ctx, resource, st); err != nil {
		return nil, err
	}
	return answered(in, namespace, resource, st), nil
}

// listable leaves out of st the namespaces whose view of resource the
// requester may not list, counting them in st.Hidden.
func (s *PreviewStorage) listable(ctx context.Context, resource string, st v1alpha1.PreviewStatus) (v1alpha1.PreviewStatus, error) {
	view := v1alpha1.SchemeGroupVersion.WithResource(resource).GroupResource()
	err := allowed(ctx, s.authz, view, "list", "", "")
	switch {
	case err == nil:
		return st, nil
	case apierrors.IsUnauthorized(err):
		return st, err
	}
	may := map[string]bool{}
	hidden := map[string]bool{}
	out := st
	out.Changed = nil
	for _, c := range st.Changed {
		ok, asked := may[c.Namespace]
		if !asked {
			ok = len(may) < MaxPreviewReviews && allowed(ctx, s.authz, view, "list", c.Namespace, "") == nil
			may[c.Namespace] = ok
		}
		if !ok {
			hidden[c.Namespace] = true
			continue
		}
		out.Changed = append(out.Changed, c)
	}
	out.Hidden = len(hidden)
	return out, nil
}
