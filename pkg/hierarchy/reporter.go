package hierarchy

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"

	"github.com/implicit-dev/implicit-apiserver/internal/renamedmetric"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

const hierarchyProblemsHelp = "Namespaces whose parent chain has a problem, by reason (Cycle, MissingParent, InvalidParent, DepthExceeded, ParentUIDMismatch)."

// hierarchyErrors was named implicit_hierarchy_errors: kept, as deprecated,
// for one release (internal/renamedmetric).
var hierarchyErrors = renamedmetric.GaugeVec{
	New: metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "implicit",
		Subsystem:      "hierarchy",
		Name:           "problem_namespaces",
		Help:           hierarchyProblemsHelp,
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"}),
	Old: metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "implicit",
		Name:           "hierarchy_errors",
		Help:           renamedmetric.Help("implicit_hierarchy_problem_namespaces", hierarchyProblemsHelp),
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"}),
}

// RegisterMetrics registers the package's metrics with register (the
// server's wiring passes legacyregistry.MustRegister); once per process,
// later calls do nothing.
func RegisterMetrics(register func(...metrics.Registerable)) {
	registerOnce.Do(func() {
		register(hierarchyErrors.New, hierarchyErrors.Old)
	})
}

var registerOnce sync.Once

// Reporter reports parent cycles, missing or invalid parents,
// parents that are not the namespace the label meant (ParentUIDMismatch) and
// namespaces with more ancestors than the policy's MaxDepth.
//
// Every namespace event enqueues one key; the single worker re-resolves every
// namespace's lineage, so a burst of events costs one pass, of
// O(namespaces × MaxDepth). It sets the
// implicit_hierarchy_problem_namespaces gauge, logs each problem when it appears, and
// records a Warning Event on the namespace that carries the offending label.
// The reporter only reads: inheritance itself is computed on each read by
// the views (pkg/views, pkg/watchmux), which never follow a cycle.
type Reporter struct {
	policy     merge.Policy
	namespaces corelisters.NamespaceLister
	synced     cache.InformerSynced
	recorder   record.EventRecorder
	queue      workqueue.TypedRateLimitingInterface[string]
	// known holds the problem last reported per namespace; worker-only.
	known map[string]string
}

const resyncKey = "namespaces"

// NewReporter returns a reporter fed by informer.
func NewReporter(policy merge.Policy, informer coreinformers.NamespaceInformer) (*Reporter, error) {
	r := &Reporter{
		policy:     policy,
		namespaces: informer.Lister(),
		synced:     informer.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 10*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "implicit_hierarchy"}),
		known: map[string]string{},
	}
	enqueue := func(any) { r.queue.Add(resyncKey) }
	_, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, _ any) { r.queue.Add(resyncKey) },
		DeleteFunc: enqueue,
	})
	return r, err
}

// Run reports until ctx is cancelled, recording Events with recorder when it is not nil.
func (r *Reporter) Run(ctx context.Context, recorder record.EventRecorder) {
	defer utilruntime.HandleCrash()
	r.recorder = recorder
	defer r.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), r.synced) {
		return
	}
	// One worker: it alone touches known. Cancelling ctx shuts the queue
	// down (deferred above), which ends the worker; Run waits for it.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		wait.UntilWithContext(ctx, func(context.Context) {
			for r.processNext() {
			}
		}, time.Second)
	}()
	<-ctx.Done()
	r.queue.ShutDown()
	wg.Wait()
}

func (r *Reporter) processNext() bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	if err := r.report(); err != nil {
		utilruntime.HandleError(err)
		r.queue.AddRateLimited(key)
		return true
	}
	r.queue.Forget(key)
	return true
}

// report resolves every namespace and publishes the problems found.
func (r *Reporter) report() error {
	all, err := r.namespaces.List(labels.Everything())
	if err != nil {
		return err
	}
	byName := make(map[string]*corev1.Namespace, len(all))
	for _, ns := range all {
		byName[ns.Name] = ns
	}
	get := func(name string) (*merge.Namespace, bool) {
		ns, ok := byName[name]
		if !ok {
			return nil, false
		}
		return merge.NamespaceOf(ns), true
	}
	// A problem is counted once, on the namespace that carries the label
	// (for DepthExceeded, on each namespace too deep).
	current := map[string]merge.Problem{}
	for _, ns := range all {
		if p := merge.Resolve(r.policy, ns.Name, get).Problem; p != nil {
			current[p.Namespace] = *p
		}
	}
	counts := make(map[merge.ProblemReason]int, len(merge.ProblemReasons))
	for _, reason := range merge.ProblemReasons {
		counts[reason] = 0
	}
	for name, p := range current {
		counts[p.Reason]++
		msg := p.String()
		if r.known[name] == msg {
			continue
		}
		r.known[name] = msg
		klog.InfoS("Hierarchy problem", "namespace", klog.KRef("", name), "reason", p.Reason, "problem", msg)
		if r.recorder != nil {
			if ns, ok := byName[name]; ok {
				r.recorder.Event(inNamespace(ns), corev1.EventTypeWarning, "Hierarchy"+string(p.Reason), msg)
			}
		}
	}
	for name := range r.known {
		if _, ok := current[name]; !ok {
			delete(r.known, name)
			klog.InfoS("Hierarchy problem resolved", "namespace", klog.KRef("", name))
		}
	}
	for reason, n := range counts {
		hierarchyErrors.WithLabelValues(string(reason)).Set(float64(n))
	}
	return nil
}

// inNamespace is the reference an Event about namespace ns is recorded on:
// the Namespace itself, with the Event put in that namespace (an Event
// about a cluster-scoped object would go to "default", where the
// namespace's tenants never look; kubectl events -n NS shows it there).
func inNamespace(ns *corev1.Namespace) *corev1.ObjectReference {
	return &corev1.ObjectReference{
		APIVersion: "v1", Kind: "Namespace", Name: ns.Name, UID: ns.UID,
		ResourceVersion: ns.ResourceVersion, Namespace: ns.Name,
	}
}
