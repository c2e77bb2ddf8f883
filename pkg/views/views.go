package views

import (
	"context"
	"crypto/sha1"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	lru "github.com/hashicorp/golang-lru/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// Mux is where views are read and watched: a *watchmux.Mux.
type Mux interface {
	Read(f func(watchmux.Reader)) (string, error)
	Watch(ctx context.Context, opts watchmux.WatchOptions) (watch.Interface, error)
}

// View serves the views of one resource. It implements registry.Viewer.
type View struct {
	// resource is the view's group and resource, for errors.
	resource schema.GroupResource
	mux      Mux
	stale    Staleness
	// kind, when set, is the view's group-version-kind, set on items of
	// kinds served from unstructured objects (which carry the source's).
	kind schema.GroupVersionKind
}

// WithKind sets the view's group-version-kind on unstructured items.
func (v *View) WithKind(gvk schema.GroupVersionKind) *View {
	v.kind = gvk
	return v
}

// Staleness reports whether the hub cluster the global sources come from
// is unreachable, and since when: its items are the last ones read.
type Staleness func() (since time.Time, stale bool)

// WithStaleness marks the items of a hub's global sources with
// implicit.dev/source-stale-since while stale says the hub is unreachable.
func (v *View) WithStaleness(stale Staleness) *View {
	v.stale = stale
	return v
}

var (
	_ registry.Viewer      = &View{}
	_ registry.NamedLister = &View{}
)

// New returns the view of resource, read from mux.
func New(resource schema.GroupResource, mux Mux) *View {
	return &View{resource: resource, mux: mux}
}

// Get returns the view item name in namespace, or a NotFound error.
func (v *View) Get(_ context.Context, namespace, name string) (runtime.Object, error) {
	var results []merge.Result
	rv, err := v.mux.Read(func(r watchmux.Reader) {
		results = r.Results(v.resource.Resource, namespace, name)
	})
	if err != nil {
		return nil, v.readError(err)
	}
	if len(results) == 0 {
		return nil, apierrors.NewNotFound(v.resource, name)
	}
	return item(namespace, results[0], rv, v.stale, v.kind)
}

// List returns the view items of namespace, sorted by name, or those of
// every namespace, sorted by namespace and name, when namespace is "", and
// the resourceVersion they are current at.
func (v *View) List(ctx context.Context, namespace string) ([]runtime.Object, string, error) {
	return v.list(ctx, namespace, "")
}

// ListNamed is List of the items named name only: each namespace merges that
// name alone. It implements registry.NamedLister.
func (v *View) ListNamed(ctx context.Context, namespace, name string) ([]runtime.Object, string, error) {
	return v.list(ctx, namespace, name)
}

func (v *View) list(_ context.Context, namespace, name string) ([]runtime.Object, string, error) {
	type nsResults struct {
		namespace string
		results   []merge.Result
	}
	var all []nsResults
	// Merge under the read lock; copy the objects after it.
	rv, err := v.mux.Read(func(r watchmux.Reader) {
		names := []string{namespace}
		if namespace == "" {
			names = r.Namespaces()
		}
		for _, ns := range names {
			if res := r.Results(v.resource.Resource, ns, name); len(res) > 0 {
				all = append(all, nsResults{ns, res})
			}
		}
	})
	if err != nil {
		return nil, "", v.readError(err)
	}
	var out []runtime.Object
	for _, nr := range all {
		for _, r := range nr.results {
			obj, err := item(nr.namespace, r, rv, v.stale, v.kind)
			if err != nil {
				return nil, "", err
			}
			out = append(out, obj)
		}
	}
	return out, rv, nil
}

// Watch watches namespace's view, or every namespace's when namespace is "".
func (v *View) Watch(ctx context.Context, namespace string, req registry.WatchRequest) (watch.Interface, error) {
	w, err := v.mux.Watch(ctx, watchmux.WatchOptions{
		Resource:          v.resource.Resource,
		Namespace:         namespace,
		Name:              req.Name,
		ResourceVersion:   req.ResourceVersion,
		SendInitialEvents: req.SendInitialEvents,
		AllowBookmarks:    req.AllowBookmarks,
		Matches:           matchesUnwrapped(req.Matches),
		GroupResource:     v.resource,
	})
	if err != nil {
		return nil, v.readError(err)
	}
	return w, nil
}

// matchesUnwrapped applies a selector to the view item inside a shared one.
func matchesUnwrapped(matches func(runtime.Object) bool) func(runtime.Object) bool {
	if matches == nil {
		return nil
	}
	return func(obj runtime.Object) bool { return matches(unwrap(obj)) }
}

func (v *View) readError(err error) error {
	if watchmux.IsNotSynced(err) {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("%s: implicit-apiserver is starting and has not read its sources yet", v.resource))
	}
	return err
}

// Objects builds the view objects of watch events for the mux. It
// implements watchmux.Objects. Items of recent events are cached and shared
// by every watcher that sends them (see cachedObject).
type Objects struct {
	// newObject returns an empty object of each resource; mu guards it, as
	// resources are added at run time.
	mu        sync.RWMutex
	newObject map[string]func() runtime.Object
	kinds     map[string]schema.GroupVersionKind
	cache     *itemCache
	templates *templateCache
	stale     Staleness
}

// WithStaleness is View.WithStaleness for watch events.
func (o *Objects) WithStaleness(stale Staleness) *Objects {
	o.stale = stale
	return o
}

var _ watchmux.Objects = &Objects{}

// NewObjects returns the objects of the resources newObject names, sharing
// the items of the latest cacheSize events (DefaultItemCacheSize if <= 0).
func NewObjects(newObject map[string]func() runtime.Object, cacheSize int) *Objects {
	if cacheSize <= 0 {
		cacheSize = DefaultItemCacheSize
	}
	templates, err := lru.New[templateKey, *itemTemplate](templateCacheSize)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return &Objects{newObject: newObject, kinds: map[string]schema.GroupVersionKind{}, cache: newItemCache(cacheSize), templates: templates}
}

// Item implements watchmux.Objects.
func (o *Objects) Item(resource, namespace string, r merge.Result, rv string) (runtime.Object, error) {
	return o.sharedItem(resource, namespace, r, rv)
}

// Empty implements watchmux.Objects.
func (o *Objects) Empty(resource string) runtime.Object {
	o.mu.RLock()
	newObject := o.newObject[resource]
	o.mu.RUnlock()
	return newObject()
}

// Add adds a resource served at run time; newObject returns its empty
// object. The items of a resource whose empty object is unstructured get its
// group-version-kind.
func (o *Objects) Add(resource string, newObject func() runtime.Object) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.newObject[resource] = newObject
	if u, ok := newObject().(*unstructured.Unstructured); ok {
		o.kinds[resource] = u.GroupVersionKind()
	}
}

func (o *Objects) kindOf(resource string) schema.GroupVersionKind {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.kinds[resource]
}

// uidSpace is the UUID namespace of view item uids.
var uidSpace = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://implicit.dev/views"))

// UID is the stable uid of the view, in namespace, of the source object
// with uid source: the name-based (SHA-1, version 5) UUID of
// "<source>/<namespace>" in uidSpace, made without the garbage of
// uuid.NewSHA1 (a fan-out makes one per event).
func UID(source types.UID, namespace string) types.UID {
	var buf [128]byte
	b := append(buf[:0], uidSpace[:]...)
	b = append(append(append(b, source...), '/'), namespace...)
	sum := sha1.Sum(b)
	var u uuid.UUID
	copy(u[:], sum[:])
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return types.UID(u.String())
}

// item returns a copy of r's source object, or of its merged object when
// overlays were merged onto it, as the view item of namespace at rv. stale,
// when set, says whether a hub's items are stale.
func item(namespace string, r merge.Result, rv string, stale Staleness, kind schema.GroupVersionKind) (runtime.Object, error) {
	from := r.Item.Object
	if r.Object != nil {
		from = r.Object
	}
	src, ok := from.(runtime.Object)
	if !ok {
		return nil, fmt.Errorf("source %s/%s is a %T, not a runtime.Object", r.Item.Namespace, r.Item.Name, from)
	}
	obj := src.DeepCopyObject()
	if u, ok := obj.(*unstructured.Unstructured); ok && !kind.Empty() {
		u.SetGroupVersionKind(kind)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("source %s/%s: %w", r.Item.Namespace, r.Item.Name, err)
	}
	sourceUID, sourceRV := m.GetUID(), m.GetResourceVersion()
	staged := r.Candidates()
	if r.Item.FromCandidate != "" {
		// A candidate's item stands in for its stable source: the stable
		// name, and the stable source's uid (a staged creation's is the
		// candidate's), so switching versions is a MODIFIED of one item.
		m.SetName(r.Item.Name)
		sourceUID = r.Item.UID
	}

	m.SetNamespace(namespace)
	m.SetUID(UID(sourceUID, namespace))
	// The server's own version: a source's, from another store, would be
	// misread by clients resuming a watch.
	m.SetResourceVersion(rv)
	m.SetSelfLink("")
	// Managed fields and owner references describe the source object in its
	// own namespace; on a read-only view they would mislead.
	m.SetManagedFields(nil)
	m.SetOwnerReferences(nil)

	lbls := withoutKeys(m.GetLabels(), v1alpha1.ProvenanceLabels)
	lbls[v1alpha1.LabelScope] = string(r.Scope)
	lbls[v1alpha1.LabelSourceNamespace] = r.Item.Namespace
	m.SetLabels(lbls)

	ann := withoutKeys(m.GetAnnotations(), v1alpha1.ProvenanceAnnotations)
	// kubectl apply's record of the source's last applied file: the
	// source's, which a view item (read-only, never applied) must not carry.
	delete(ann, corev1.LastAppliedConfigAnnotation)
	if r.Item.FromCandidate != "" {
		// What made the object a candidate is not the view item's: it is
		// the stable name's item, annotated with the candidate instead.
		delete(ann, v1alpha1.AnnotationCandidateFor)
		delete(ann, v1alpha1.AnnotationCanarySelector)
		delete(ann, v1alpha1.AnnotationCanaryClusters)
	}
	if staged != "" {
		ann[v1alpha1.AnnotationCandidate] = staged
	}
	ann[v1alpha1.AnnotationSourceUID] = string(sourceUID)
	ann[v1alpha1.AnnotationSourceResourceVersion] = sourceRV
	if len(r.Conflicts) > 0 {
		ann[v1alpha1.AnnotationConflict] = r.Conflict()
	}
	if len(r.Overlays) > 0 {
		ann[v1alpha1.AnnotationOverlays] = r.OverlaySources()
	}
	if r.Item.Cluster != "" {
		ann[v1alpha1.AnnotationSourceCluster] = r.Item.Cluster
		if stale != nil {
			if since, ok := stale(); ok {
				ann[v1alpha1.AnnotationSourceStaleSince] = since.UTC().Format(time.RFC3339)
			}
		}
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
