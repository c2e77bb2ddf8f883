package views

import (
	"context"
	"fmt"
	"sort"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// View computes the views of one resource. It implements registry.Viewer.
type View struct {
	// resource is the view's group and resource, for errors.
	resource   schema.GroupResource
	policy     merge.Policy
	namespaces corelisters.NamespaceLister
	// items indexes the source objects by namespace (cache.NamespaceIndex).
	items cache.Indexer
}

// New returns the view of the source objects in items, a cache indexed by
// cache.NamespaceIndex, as resource.
func New(resource schema.GroupResource, policy merge.Policy, namespaces corelisters.NamespaceLister, items cache.Indexer) *View {
	return &View{resource: resource, policy: policy, namespaces: namespaces, items: items}
}

// Get returns the view item name in namespace, or a NotFound error.
func (v *View) Get(_ context.Context, namespace, name string) (runtime.Object, error) {
	results, err := v.merge(namespace, func(it merge.Item) bool { return it.Name == name })
	if err != nil {
		return nil, err
	}
	if len(results) == 0 {
		return nil, apierrors.NewNotFound(v.resource, name)
	}
	return viewItem(namespace, results[0])
}

// List returns the view items of namespace, sorted by name, or those of
// every namespace, sorted by namespace and name, when namespace is "".
func (v *View) List(_ context.Context, namespace string) ([]runtime.Object, error) {
	names := []string{namespace}
	if namespace == "" {
		all, err := v.namespaces.List(labels.Everything())
		if err != nil {
			return nil, fmt.Errorf("listing namespaces: %w", err)
		}
		names = make([]string, 0, len(all))
		for _, ns := range all {
			names = append(names, ns.Name)
		}
		sort.Strings(names)
	}
	var out []runtime.Object
	for _, ns := range names {
		results, err := v.merge(ns, nil)
		if err != nil {
			return nil, err
		}
		for _, r := range results {
			obj, err := viewItem(ns, r)
			if err != nil {
				return nil, err
			}
			out = append(out, obj)
		}
	}
	return out, nil
}

// merge computes namespace's view, keeping only the source items keep accepts (all when nil).
func (v *View) merge(namespace string, keep func(merge.Item) bool) ([]merge.Result, error) {
	lineage := merge.Resolve(v.policy, namespace, v.namespace)
	var ierr error
	levels := merge.Levels(lineage, v.policy.GlobalNamespace, func(ns string) []merge.Item {
		objs, err := v.items.ByIndex(cache.NamespaceIndex, ns)
		if err != nil {
			ierr = err
			return nil
		}
		items := make([]merge.Item, 0, len(objs))
		for _, o := range objs {
			m, err := meta.Accessor(o)
			if err != nil {
				ierr = err
				return nil
			}
			it := merge.Item{Namespace: m.GetNamespace(), Name: m.GetName(), Locked: merge.IsLocked(m.GetAnnotations()), Object: o}
			if keep == nil || keep(it) {
				items = append(items, it)
			}
		}
		return items
	})
	if ierr != nil {
		return nil, fmt.Errorf("reading %s sources: %w", v.resource.Resource, ierr)
	}
	return merge.Merge(v.resource.Resource, levels), nil
}

// namespace is the merge.NamespaceGetter of the namespace cache.
func (v *View) namespace(name string) (*merge.Namespace, bool) {
	ns, err := v.namespaces.Get(name)
	if err != nil {
		return nil, false
	}
	return Namespace(ns), true
}

// Namespace returns what merging needs of ns. It shares ns's maps: read only.
func Namespace(ns *corev1.Namespace) *merge.Namespace {
	return &merge.Namespace{Name: ns.Name, Labels: ns.Labels, Annotations: ns.Annotations}
}

// uidSpace is the UUID namespace of view item uids.
var uidSpace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://implicit.dev/views"))

// UID is the stable uid of the view, in namespace, of the source object with uid source.
func UID(source types.UID, namespace string) types.UID {
	return types.UID(uuid.NewSHA1(uidSpace, []byte(string(source)+"/"+namespace)).String())
}

// viewItem returns a copy of r's source object as the view item of namespace.
func viewItem(namespace string, r merge.Result) (runtime.Object, error) {
	src, ok := r.Item.Object.(runtime.Object)
	if !ok {
		return nil, fmt.Errorf("source %s/%s is a %T, not a runtime.Object", r.Item.Namespace, r.Item.Name, r.Item.Object)
	}
	obj := src.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("source %s/%s: %w", r.Item.Namespace, r.Item.Name, err)
	}
	sourceUID, sourceRV := m.GetUID(), m.GetResourceVersion()

	m.SetNamespace(namespace)
	m.SetUID(UID(sourceUID, namespace))
	// The view's resourceVersion is the server's own (see pkg/watchmux); a
	// source's, from another store, would be misread by clients.
	m.SetResourceVersion("")
	m.SetSelfLink("")
	// Managed fields and owner references describe the source object in its
	// own namespace; on a read-only view they would mislead.
	m.SetManagedFields(nil)
	m.SetOwnerReferences(nil)

	lbls := withoutKeys(m.GetLabels(), merge.ProvenanceLabels)
	lbls[merge.LabelScope] = string(r.Scope)
	lbls[merge.LabelSourceNamespace] = r.Item.Namespace
	m.SetLabels(lbls)

	ann := withoutKeys(m.GetAnnotations(), merge.ProvenanceAnnotations)
	ann[merge.AnnotationSourceUID] = string(sourceUID)
	ann[merge.AnnotationSourceResourceVersion] = sourceRV
	if len(r.Conflicts) > 0 {
		ann[merge.AnnotationConflict] = r.Conflict()
	}
	m.SetAnnotations(ann)
	return obj, nil
}

// withoutKeys copies in without the given keys: a source can't spoof provenance.
func withoutKeys(in map[string]string, drop []string) map[string]string {
	out := make(map[string]string, len(in)+len(drop))
	for k, v := range in {
		out[k] = v
	}
	for _, k := range drop {
		delete(out, k)
	}
	return out
}
