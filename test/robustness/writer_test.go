package robustness

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

const (
	globalNS = "implicit-global"
	// parents and tenants: tenants point at a parent, a parent at a parent
	// of a lower number (never a cycle).
	parents = 3
	tenants = 5
	// bindingNames is the pool of RoleBinding names: few, so that the same
	// name meets in several scopes (precedence, locks, exclusions).
	bindingNames = 5
	// writeEvery is the writer's period.
	writeEvery = 150 * time.Millisecond
	// maxDeleting bounds the namespaces being deleted and re-created at once.
	maxDeleting = 2
)

func parentNS(i int) string    { return fmt.Sprintf("p-%d", i) }
func tenantNS(i int) string    { return fmt.Sprintf("t-%d", i) }
func bindingName(i int) string { return fmt.Sprintf("rb-%d", i) }

// writeStats counts the writer's requests.
type writeStats struct {
	// ops counts the writes admitted, by kind.
	ops map[string]int
	// refused are writes answered with an error the writer accepts (a
	// conflict, not found, a namespace terminating, kube-apiserver down).
	refused int
	// recreated counts namespaces deleted and created again.
	deleted, recreated int
}

func (s writeStats) total() int {
	n := 0
	for _, v := range s.ops {
		n += v
	}
	return n
}

// writer makes random valid writes of everything the views read, drawn
// from its own seeded source.
type writer struct {
	kube kubernetes.Interface
	rng  *rand.Rand

	mu    sync.Mutex
	stats writeStats
	// deleting are the namespaces being deleted (and then re-created): the
	// writer leaves them alone.
	deleting map[string]bool
	pending  sync.WaitGroup
	edits    atomic.Int64
}

func newWriter(kube kubernetes.Interface, seed uint64) *writer {
	return &writer{
		kube: kube, rng: rand.New(rand.NewPCG(seed, 1)),
		stats: writeStats{ops: map[string]int{}}, deleting: map[string]bool{},
	}
}

// seedObjects creates the namespaces and a few bindings.
func (w *writer) seedObjects(ctx context.Context) error {
	if err := w.createNamespace(ctx, globalNS, nil); err != nil {
		return err
	}
	for i := range parents {
		var labels map[string]string
		if i > 0 {
			labels = map[string]string{"implicit.dev/parent": parentNS(0)}
		}
		if err := w.createNamespace(ctx, parentNS(i), labels); err != nil {
			return err
		}
	}
	for i := range tenants {
		if err := w.createNamespace(ctx, tenantNS(i), map[string]string{"implicit.dev/parent": parentNS(i % parents)}); err != nil {
			return err
		}
	}
	for _, ns := range append([]string{globalNS, parentNS(0)}, tenantNS(0)) {
		for i := range 2 {
			if _, err := w.kube.RbacV1().RoleBindings(ns).Create(ctx, w.binding(ns, bindingName(i)), metav1.CreateOptions{}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (w *writer) createNamespace(ctx context.Context, name string, labels map[string]string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if p := labels["implicit.dev/parent"]; p != "" {
		// What the guards' mutating webhook records.
		if parent, err := w.kube.CoreV1().Namespaces().Get(ctx, p, metav1.GetOptions{}); err == nil {
			ns.Annotations = map[string]string{"implicit.dev/parent-uid": string(parent.UID)}
		}
	}
	_, err := w.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// binding is a valid RoleBinding with random subjects.
func (w *writer) binding(ns, name string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: fmt.Sprintf("group-%d", w.rng.IntN(100))}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
	}
}

// run writes every writeEvery until ctx ends, then waits for the
// namespaces it is re-creating (bounded by done's lifetime).
func (w *writer) run(ctx, outer context.Context) {
	tick := time.NewTicker(writeEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			w.pending.Wait()
			return
		case <-tick.C:
		}
		w.step(outer)
	}
}

// step makes one random write. Each request runs under outer, so that the
// end of a phase never cuts one off half-way, its outcome unknown.
func (w *writer) step(ctx context.Context) {
	w.mu.Lock()
	r := w.rng.IntN(100)
	w.mu.Unlock()
	var kind string
	var err error
	switch {
	case r < 55:
		kind, err = w.bindingOp(ctx)
	case r < 70:
		kind, err = w.reparent(ctx)
	case r < 82:
		kind, err = w.exclude(ctx)
	case r < 90:
		kind, err = w.stage(ctx)
	case r < 95:
		kind, err = w.candidate(ctx)
	default:
		kind, err = w.deleteNamespace(ctx)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case kind == "":
	case err == nil:
		w.stats.ops[kind]++
		w.edits.Add(1)
	default:
		w.stats.refused++
	}
}

// pick returns a random namespace the writer may write in: the global
// namespace, a parent or a tenant, none being deleted.
func (w *writer) pick(global bool) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		var ns string
		switch r := w.rng.IntN(10); {
		case global && r < 2:
			ns = globalNS
		case r < 5:
			ns = parentNS(w.rng.IntN(parents))
		default:
			ns = tenantNS(w.rng.IntN(tenants))
		}
		if !w.deleting[ns] {
			return ns
		}
	}
}

func (w *writer) intn(n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rng.IntN(n)
}

// bindingOp creates, edits, locks, unlocks or deletes a RoleBinding.
func (w *writer) bindingOp(ctx context.Context) (string, error) {
	ns, name := w.pick(true), bindingName(w.intn(bindingNames))
	rbs := w.kube.RbacV1().RoleBindings(ns)
	switch w.intn(5) {
	case 0, 1:
		w.mu.Lock()
		b := w.binding(ns, name)
		w.mu.Unlock()
		_, err := rbs.Create(ctx, b, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			return "binding-create", err
		}
		patch, _ := json.Marshal(map[string]any{"subjects": b.Subjects})
		_, err = rbs.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		return "binding-edit", err
	case 2:
		_, err := rbs.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"implicit.dev/locked":"true"}}}`), metav1.PatchOptions{})
		return "lock", err
	case 3:
		_, err := rbs.Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"implicit.dev/locked":null}}}`), metav1.PatchOptions{})
		return "unlock", err
	default:
		return "binding-delete", rbs.Delete(ctx, name, metav1.DeleteOptions{})
	}
}

// reparent moves a tenant to another parent (or none), or a parent under a
// parent of a lower number (or none), recording the parent's uid as the
// guards' mutating webhook does.
func (w *writer) reparent(ctx context.Context) (string, error) {
	var ns, parent string
	if w.intn(4) == 0 {
		i := 1 + w.intn(parents-1)
		ns = parentNS(i)
		if j := w.intn(i + 1); j < i {
			parent = parentNS(j)
		}
	} else {
		ns = tenantNS(w.intn(tenants))
		if j := w.intn(parents + 1); j < parents {
			parent = parentNS(j)
		}
	}
	w.mu.Lock()
	busy := w.deleting[ns] || w.deleting[parent]
	w.mu.Unlock()
	if busy {
		return "", nil
	}
	patch := `{"metadata":{"labels":{"implicit.dev/parent":null},"annotations":{"implicit.dev/parent-uid":null}}}`
	if parent != "" {
		p, err := w.kube.CoreV1().Namespaces().Get(ctx, parent, metav1.GetOptions{})
		if err != nil {
			return "reparent", err
		}
		patch = fmt.Sprintf(`{"metadata":{"labels":{"implicit.dev/parent":%q},"annotations":{"implicit.dev/parent-uid":%q}}}`, parent, p.UID)
	}
	_, err := w.kube.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return "reparent", err
}

// exclude sets or removes a namespace's exclusions.
func (w *writer) exclude(ctx context.Context) (string, error) {
	ns := w.pick(false)
	value := "null"
	switch w.intn(3) {
	case 0:
		value = fmt.Sprintf("%q", "rolebindings/"+bindingName(w.intn(bindingNames)))
	case 1:
		value = `"rolebindings/*"`
	}
	_, err := w.kube.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType,
		[]byte(`{"metadata":{"annotations":{"implicit.dev/exclude":`+value+`}}}`), metav1.PatchOptions{})
	return "exclude", err
}

// stage puts a tenant in the canary stage or takes it out.
func (w *writer) stage(ctx context.Context) (string, error) {
	ns := tenantNS(w.intn(tenants))
	value := "null"
	if w.intn(2) == 0 {
		value = `"canary"`
	}
	_, err := w.kube.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"implicit.dev/stage":`+value+`}}}`), metav1.PatchOptions{})
	return "stage", err
}

// candidate creates or deletes a staged version of a global or parent
// binding, seen by the canary stage.
func (w *writer) candidate(ctx context.Context) (string, error) {
	ns := globalNS
	if w.intn(2) == 0 {
		ns = parentNS(w.intn(parents))
	}
	w.mu.Lock()
	busy := w.deleting[ns]
	w.mu.Unlock()
	if busy {
		return "", nil
	}
	target := bindingName(w.intn(bindingNames))
	name := "cand-" + target
	rbs := w.kube.RbacV1().RoleBindings(ns)
	if w.intn(3) == 0 {
		return "candidate-delete", rbs.Delete(ctx, name, metav1.DeleteOptions{})
	}
	w.mu.Lock()
	b := w.binding(ns, name)
	w.mu.Unlock()
	b.Annotations = map[string]string{
		"implicit.dev/candidate-for":   target,
		"implicit.dev/canary-selector": "implicit.dev/stage=canary",
	}
	_, err := rbs.Create(ctx, b, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		patch, _ := json.Marshal(map[string]any{"subjects": b.Subjects})
		_, err = rbs.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	return "candidate", err
}

// deleteNamespace deletes a tenant or a parent and, once
// kube-controller-manager has removed it, creates it again under a parent.
func (w *writer) deleteNamespace(ctx context.Context) (string, error) {
	ns := w.pick(false)
	w.mu.Lock()
	if len(w.deleting) >= maxDeleting {
		w.mu.Unlock()
		return "", nil
	}
	w.deleting[ns] = true
	var labels map[string]string
	if j := w.rng.IntN(parents); parentNS(j) != ns && (ns[0] == 't' || parentNS(j) < ns) {
		labels = map[string]string{"implicit.dev/parent": parentNS(j)}
	}
	w.mu.Unlock()
	err := w.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err != nil {
		w.mu.Lock()
		delete(w.deleting, ns)
		w.mu.Unlock()
		return "namespace-delete", err
	}
	w.pending.Add(1)
	go func() {
		defer w.pending.Done()
		// Gone once the namespace controller emptied it; bounded, as a
		// namespace stuck terminating would hold the quiet point.
		_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := w.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			return w.createNamespace(ctx, ns, labels) == nil, nil
		})
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.deleting, ns)
		w.stats.recreated++
	}()
	w.mu.Lock()
	w.stats.deleted++
	w.mu.Unlock()
	return "namespace-delete", nil
}

func (w *writer) snapshot() writeStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.ops = map[string]int{}
	for k, v := range w.stats.ops {
		s.ops[k] = v
	}
	return s
}
