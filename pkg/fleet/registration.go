package fleet

import (
	"context"
	"maps"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
)

// Registration is the member's own MemberCluster on the hub, as the hub's
// admin registered it: whether it exists, and its labels.
type Registration struct {
	name     string
	informer cache.SharedIndexInformer

	mu         sync.RWMutex
	labels     labels.Set
	registered bool
	onChange   []func()
	started    bool
}

// NewRegistration watches the MemberCluster name on the hub through client:
// a list and watch of memberclusters with the field selector
// metadata.name=name, which RBAC's resourceNames can limit to it.
func NewRegistration(client dynamic.Interface, name string) *Registration {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	informer := dynamicinformer.NewFilteredDynamicInformer(client, fleetv1alpha1.GroupVersionResource, metav1.NamespaceAll, 0,
		cache.Indexers{}, func(o *metav1.ListOptions) { o.FieldSelector = selector }).Informer()
	r := &Registration{name: name, informer: informer}
	// The handler is added before the informer starts (Run): it can't fail
	// then.
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.set(obj, false) },
		UpdateFunc: func(_, obj any) { r.set(obj, false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			r.set(obj, true)
		},
	})
	return r
}

// Name is the member's name: its MemberCluster's.
func (r *Registration) Name() string { return r.name }

// Labels returns the member's registered labels, and whether the member is
// registered (its MemberCluster exists). The set is a copy.
func (r *Registration) Labels() (labels.Set, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return maps.Clone(r.labels), r.registered
}

// OnChange calls f, on the informer's goroutine, whenever the member is
// registered or unregistered or its labels change. Call it before Run.
func (r *Registration) OnChange(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		panic("fleet: Registration.OnChange after Run")
	}
	r.onChange = append(r.onChange, f)
}

// HasSynced reports whether the MemberCluster has been looked up once.
func (r *Registration) HasSynced() bool { return r.informer.HasSynced() }

// Run watches until ctx ends.
func (r *Registration) Run(ctx context.Context) {
	r.mu.Lock()
	r.started = true
	r.mu.Unlock()
	r.informer.RunWithContext(ctx)
}

// set records obj, or its deletion, and calls the OnChange functions if
// the registration or the labels changed. Another member's object (the
// field selector keeps them out) changes nothing.
func (r *Registration) set(obj any, deleted bool) {
	m, ok := obj.(metav1.Object)
	if !ok || m.GetName() != r.name {
		return
	}
	var next labels.Set
	registered := !deleted
	if registered {
		next = labels.Set(maps.Clone(m.GetLabels()))
	}
	r.mu.Lock()
	changed := registered != r.registered || !labels.Equals(next, r.labels)
	r.labels, r.registered = next, registered
	funcs := r.onChange
	r.mu.Unlock()
	if !changed {
		return
	}
	klog.InfoS("Fleet registration changed", "member", r.name, "registered", registered, "labels", next.String())
	for _, f := range funcs {
		f()
	}
}
