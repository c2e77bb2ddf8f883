package materialize

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// lister returns the copies of k in namespace (objects carrying the label):
// unstructured, or of the kind's Go type (Protobuf's informers).
type lister func(k kinds.Kind, namespace string) ([]metav1.Object, error)

// reconcile makes namespace's copies of every kind its views serve equal to
// the inherited items of its views. It returns how many writes it made.
func (m *Materializer) reconcile(ctx context.Context, namespace string, list lister) (int, error) {
	live := false
	if _, err := m.views.Read(func(r watchmux.Reader) {
		_, exists := r.Namespace(namespace)
		live = exists && !r.Terminating(namespace)
	}); err != nil || !live {
		// Copies go with their namespace; nothing is written into one
		// being deleted. Before the sources are read no kind is served:
		// nothing would be written either.
		return 0, nil
	}
	total := 0
	var errs []error
	for _, k := range m.kinds {
		if !m.views.Serving(k.Resource()) {
			continue // fail-static: follow queues every namespace once it is
		}
		n, err := m.reconcileKind(ctx, k, namespace, list)
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", k.Resource(), err))
		}
	}
	return total, utilerrors.NewAggregate(errs)
}

func (m *Materializer) reconcileKind(ctx context.Context, k kinds.Kind, namespace string, list lister) (int, error) {
	items, _, err := views.New(schema.GroupResource{Group: viewGroup, Resource: k.Resource()}, m.views).List(ctx, namespace)
	if err != nil {
		return 0, err
	}
	want := map[string]*unstructured.Unstructured{}
	for _, item := range items {
		c, ok, err := desiredCopy(k, namespace, item)
		if err != nil {
			return 0, err
		}
		if ok {
			want[c.GetName()] = c
		}
	}
	have, err := list(k, namespace)
	if errors.Is(err, errNotReady) {
		return 0, nil // follow queues every namespace once they are read
	}
	if err != nil {
		return 0, err
	}
	copies := make(map[string]metav1.Object, len(have))
	for _, c := range have {
		copies[c.GetName()] = c
	}
	client := m.opts.Protobuf.resource(m.dyn, k, namespace)
	n := 0
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(want)) {
		w, cur := want[name], copies[name]
		key := copyKey{k.Resource(), namespace, name}
		if cur == nil && m.heldBefore(key) {
			// A name a tenant object held at the last look: read it
			// rather than fail a create on every pass. A new copy is
			// otherwise created straight away (write), a tenant object
			// holding its name found by the create's AlreadyExists.
			live, err := client.Get(ctx, name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				errs = append(errs, err)
				continue
			case !v1alpha1.IsMaterialized(live.GetLabels()):
				m.conflict(k, namespace, live, w)
				continue
			default:
				cur = live
			}
		}
		if cur != nil && upToDate(cur, w) {
			continue
		}
		m.mu.Lock()
		drift := (cur != nil && sourceVersion(cur) == sourceVersion(w)) ||
			(cur == nil && m.seen[key] == sourceVersion(w))
		delete(m.reported, key)
		m.mu.Unlock()
		written, err := m.write(ctx, k, client, cur, w)
		n += written
		var taken *tenantHolds
		if errors.As(err, &taken) {
			m.conflict(k, namespace, taken.object, w)
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if drift {
			driftRepaired.WithLabelValues(k.Resource()).Inc()
			klog.InfoS("Repaired a materialized copy changed or deleted behind the guards", "resource", k.Resource(), "copy", klog.KRef(namespace, name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(copies)) {
		if _, ok := want[name]; ok {
			continue
		}
		c := copies[name]
		// Only the copy that was read is deleted: the resourceVersion
		// precondition fails if the object changed since, in particular if
		// a write made it its writer's own (the label removed at
		// admission). A conflict is retried from a fresh read.
		err := client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{
			UID: ptr.To(c.GetUID()), ResourceVersion: ptr.To(c.GetResourceVersion()),
		}})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		n++
		writes.WithLabelValues(k.Resource(), "delete").Inc()
		m.mu.Lock()
		delete(m.seen, copyKey{k.Resource(), namespace, name})
		delete(m.wrote, copyKey{k.Resource(), namespace, name})
		delete(m.uids, copyKey{k.Resource(), namespace, name})
		m.mu.Unlock()
		klog.V(2).InfoS("Deleted a materialized copy whose item left the view", "resource", k.Resource(), "copy", klog.KRef(namespace, name))
	}
	return n, utilerrors.NewAggregate(errs)
}

// write makes w the copy in one request: a new copy (cur nil, the
// informer has none) is created, never written over a name, so that an
// object holding the name is never taken over (AlreadyExists: tenantHolds
// when that object is no copy, read only then); an existing copy is
// replaced whole (Update) with cur's resourceVersion as precondition, so
// that only the copy that was read is overwritten, not an object a write
// made its own meanwhile. The finalizers and owner references others put
// on the copy are kept. The copy's resourceVersion after the write is
// remembered (wrote), so that its echo on the copies' informer is not
// taken for drift.
//
// An Update, not a server-side apply: the copy is the materializer's
// whole, and kube-apiserver's apply path (typed conversion and field sets)
// cost more than the rest of the write.
func (m *Materializer) write(ctx context.Context, k kinds.Kind, client resourceClient, cur metav1.Object, w *unstructured.Unstructured) (int, error) {
	key := copyKey{k.Resource(), w.GetNamespace(), w.GetName()}
	m.begin(key)
	defer m.end(key)
	if cur == nil {
		got, err := client.Create(ctx, w.DeepCopy(), metav1.CreateOptions{FieldManager: FieldManager})
		if err == nil {
			writes.WithLabelValues(k.Resource(), "create").Inc()
			m.remember(k, got)
			return 1, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return 0, err
		}
		live, gerr := client.Get(ctx, w.GetName(), metav1.GetOptions{})
		switch {
		case gerr != nil:
			// Gone again, or unreadable: retried from a fresh read.
			return 0, fmt.Errorf("creating the copy %s: %w; reading what holds its name: %w", w.GetName(), err, gerr)
		case !v1alpha1.IsMaterialized(live.GetLabels()):
			return 0, &tenantHolds{object: live}
		case upToDate(live, w):
			// A copy of the server's own, not yet in the informer.
			m.remember(k, live)
			return 0, nil
		}
		cur = live // overwritten as it is
	}
	replace := w.DeepCopy()
	replace.SetResourceVersion(cur.GetResourceVersion())
	replace.SetFinalizers(cur.GetFinalizers())
	replace.SetOwnerReferences(cur.GetOwnerReferences())
	got, err := client.Update(ctx, replace, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return 0, err
	}
	writes.WithLabelValues(k.Resource(), "update").Inc()
	m.remember(k, got)
	return 1, nil
}

// tenantHolds: an object that is no copy holds the name a copy was to be
// created under.
type tenantHolds struct{ object *unstructured.Unstructured }

func (e *tenantHolds) Error() string {
	return fmt.Sprintf("%s is held by an object that is no copy", e.object.GetName())
}

// remember notes the resourceVersion a write of the materializer's left
// the copy at.
func (m *Materializer) remember(k kinds.Kind, c *unstructured.Unstructured) {
	key := copyKey{k.Resource(), c.GetNamespace(), c.GetName()}
	m.mu.Lock()
	m.wrote[key] = c.GetResourceVersion()
	m.uids[key] = c.GetUID()
	m.mu.Unlock()
}

// heldBefore reports whether an object that is no copy held key's name
// when last seen (a conflict reported, or a former copy).
func (m *Materializer) heldBefore(key copyKey) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.reported[key]
	return ok
}

// begin notes that a write of key is under way: the copies' informer may
// show the version it leaves before the write returns (see end).
func (m *Materializer) begin(key copyKey) {
	m.mu.Lock()
	m.inflight[key] = ""
	m.mu.Unlock()
}

// end closes the write of key begun: a version the copies' informer showed
// meanwhile (inflight) that is not the one the write left (wrote) is
// someone else's, and its namespace is compared again (requeue).
func (m *Materializer) end(key copyKey) {
	m.mu.Lock()
	shown := m.inflight[key]
	delete(m.inflight, key)
	other := shown != "" && shown != m.wrote[key]
	requeue := m.requeue
	m.mu.Unlock()
	if other && requeue != nil {
		requeue(key.namespace)
	}
}

// resourceClient is the part of dynamic.ResourceInterface reconcileKind uses.
type resourceClient interface {
	Create(ctx context.Context, obj *unstructured.Unstructured, options metav1.CreateOptions, subresources ...string) (*unstructured.Unstructured, error)
	Get(ctx context.Context, name string, options metav1.GetOptions, subresources ...string) (*unstructured.Unstructured, error)
	Update(ctx context.Context, obj *unstructured.Unstructured, options metav1.UpdateOptions, subresources ...string) (*unstructured.Unstructured, error)
	Delete(ctx context.Context, name string, options metav1.DeleteOptions, subresources ...string) error
}

// conflict reports, once per tenant object, an inherited item that is not
// materialized because the tenant's own object holds its name. A former
// copy (its uid is one the materializer knew as a copy's) is no conflict:
// a write made it its writer's own, and the view will show it as such once
// it has read that write; it is logged only.
func (m *Materializer) conflict(k kinds.Kind, namespace string, tenant, w *unstructured.Unstructured) {
	key := copyKey{k.Resource(), namespace, tenant.GetName()}
	m.mu.Lock()
	if m.reported[key] == string(tenant.GetUID()) {
		m.mu.Unlock()
		return
	}
	m.reported[key] = string(tenant.GetUID())
	formerCopy := m.uids[key] == tenant.GetUID()
	m.mu.Unlock()
	source := w.GetLabels()[v1alpha1.LabelSourceNamespace] + "/" + w.GetName()
	if formerCopy {
		klog.InfoS("A materialized copy is no copy any more: a write made it its writer's own", "resource", k.Resource(),
			"object", klog.KRef(namespace, tenant.GetName()), "source", source)
		return
	}
	conflicts.WithLabelValues(k.Resource()).Inc()
	klog.InfoS("Inherited item not materialized: an object of the namespace's own holds its name", "resource", k.Resource(),
		"object", klog.KRef(namespace, tenant.GetName()), "source", source, "scope", w.GetLabels()[v1alpha1.LabelScope])
	if m.recorder != nil {
		// On the tenant's object, in its namespace: `kubectl describe` of
		// it and the namespace's `kubectl get events` show it to its owners.
		m.recorder.Eventf(tenant, corev1.EventTypeWarning, "MaterializeConflict",
			"the inherited %s %s from %s is not materialized in %s: this object (without %s) holds its name",
			k.Resource(), tenant.GetName(), source, namespace, v1alpha1.LabelMaterialized)
	}
}

// desiredCopy returns the copy item should be in namespace; false for a
// local item (the tenant's own). The copy is the view item without what
// describes a stored object (uid, resourceVersion, managed fields, creation
// time, status), with the source kind, the view item's labels and
// provenance annotations, and the materialized label.
func desiredCopy(k kinds.Kind, namespace string, item runtime.Object) (*unstructured.Unstructured, bool, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(item)
	if err != nil {
		return nil, false, err
	}
	in := &unstructured.Unstructured{Object: content}
	if in.GetLabels()[v1alpha1.LabelScope] == string(merge.ScopeLocal) {
		return nil, false, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	for key, v := range content {
		if key != "metadata" && key != "status" {
			out.Object[key] = v
		}
	}
	if k.Kind != "" {
		out.SetGroupVersionKind(k.Source.GroupVersion().WithKind(k.Kind))
	}
	out.SetName(in.GetName())
	out.SetNamespace(namespace)
	lbls := in.GetLabels()
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[v1alpha1.LabelMaterialized] = "true"
	out.SetLabels(lbls)
	ann := in.GetAnnotations()
	delete(ann, corev1.LastAppliedConfigAnnotation)
	if len(ann) > 0 {
		out.SetAnnotations(ann)
	}
	if _, ok := item.(*unstructured.Unstructured); !ok {
		// A Go type's conversion is already made of fresh maps, with
		// numbers as int64 or float64, as the copies' are.
		return out, true, nil
	}
	// One representation for comparing with what the host returns (JSON
	// numbers are int64 or float64 there), and a copy of the view's
	// content, which out shares.
	raw, err := json.Marshal(out.Object)
	if err != nil {
		return nil, false, err
	}
	norm := map[string]any{}
	if err := utiljson.Unmarshal(raw, &norm); err != nil {
		return nil, false, err
	}
	return &unstructured.Unstructured{Object: norm}, true, nil
}

// upToDate reports whether the copy have says what want says: the same
// labels and annotations, and the same content outside metadata and status.
// A copy of a kind's Go type is converted only when its metadata match (a
// changed source changes the provenance annotations).
func upToDate(cur metav1.Object, want *unstructured.Unstructured) bool {
	if !equalMaps(cur.GetLabels(), want.GetLabels()) || !equalMaps(cur.GetAnnotations(), want.GetAnnotations()) {
		return false
	}
	have, ok := asUnstructured(cur)
	if !ok {
		return false
	}
	keys := map[string]bool{}
	for key := range have.Object {
		keys[key] = true
	}
	for key := range want.Object {
		keys[key] = true
	}
	for key := range keys {
		switch key {
		case "metadata", "status", "apiVersion", "kind":
			continue
		}
		if !equality.Semantic.DeepEqual(have.Object[key], want.Object[key]) {
			return false
		}
	}
	return true
}

func equalMaps(a, b map[string]string) bool {
	return len(a) == len(b) && maps.Equal(a, b)
}
