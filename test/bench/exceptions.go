package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// The exceptions' burst (issue 42): N tenant namespaces, E of them with an
// exception of the global RoleBinding "waived", all ending in the same
// second; the time from that second until every view shows "waived" again
// (an -A watch of rolebindings.implicit.dev sees its ADDED in each excepted
// namespace), and the events the watch got meanwhile.
const waived = "waived"

var viewRB = schema.GroupVersionResource{Group: v1alpha1.GroupName, Version: "v1alpha1", Resource: "rolebindings"}

// exceptionsExpire runs the burst on a control plane like make run's, with
// the guards registered (the server's expiry marks go through them).
func exceptionsExpire(ctx context.Context, o options, n, excepted int) error {
	work, err := os.MkdirTemp("", "implicit-exceptions-")
	if err != nil {
		return err
	}
	fmt.Printf("== exceptions: %d tenant namespaces, %d exceptions ending in the same second; work dir %s\n", n, excepted, work)
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: o.binDir, WorkDir: work})
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	ok := false
	defer func() {
		cp.Stop()
		if ok && !o.keepWorkDir {
			os.RemoveAll(work)
		} else {
			fmt.Printf("logs kept in %s\n", filepath.Join(work, "logs"))
		}
	}()
	args := slices.Concat([]string{"-v=1", "--webhook-configuration=" + controlplane.GuardsConfiguration}, cp.WebhookServerArgs(), o.implicitArgs)
	implicit, err := cp.StartAggregated(ctx, controlplane.AggregatedServerOptions{Binary: o.binary, Name: "implicit-apiserver", Args: args})
	if err != nil {
		return fmt.Errorf("starting implicit-apiserver: %w\n%s", err, cp.LogTails(40))
	}
	if err := cp.RegisterAPIService(ctx, implicit.Port()); err != nil {
		return fmt.Errorf("registering the APIService: %w\n%s", err, implicit.LogTail(40))
	}
	admin := cp.AdminConfig()
	admin.QPS, admin.Burst = -1, 0
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(admin)
	if err != nil {
		return err
	}
	served := []schema.GroupResource{{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"},
		{Group: "rbac.authorization.k8s.io", Resource: "roles"}, {Group: "networking.k8s.io", Resource: "networkpolicies"}}
	if err := cp.RegisterGuards(ctx, implicit, served); err != nil {
		return fmt.Errorf("registering the guards: %w", err)
	}
	me, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	b := &bench{o: o, n: n, kube: kube, cfg: admin, prog: newProgress(os.Stdout, 1)}
	start := time.Now()
	if err := b.createNamespace(ctx, globalNS, nil); err != nil {
		return err
	}
	rb := roleBinding(waived)
	if _, err := kube.RbacV1().RoleBindings(globalNS).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		return err
	}
	orgs := orgCount(n)
	if err := parallel(ctx, orgs, workers, func(ctx context.Context, i int) error {
		return b.createNamespace(ctx, fmt.Sprintf("org-%d", i), nil)
	}); err != nil {
		return err
	}
	tenant := func(i int) string { return fmt.Sprintf("team-%d", i) }
	exceptedNS := map[string]bool{}
	for i := range excepted {
		exceptedNS[tenant(i*(n/excepted))] = true
	}
	// holding counts the excepted namespaces whose view holds the item.
	holding := func(items []unstructured.Unstructured) int {
		c := 0
		for _, it := range items {
			if exceptedNS[it.GetNamespace()] {
				c++
			}
		}
		return c
	}
	if err := parallel(ctx, n, workers, func(ctx context.Context, i int) error {
		return b.createNamespace(ctx, tenant(i), map[string]string{labelParent: fmt.Sprintf("org-%d", min(i/100, orgs-1))})
	}); err != nil {
		return err
	}
	fmt.Printf("setup: %d namespaces in %s\n", 1+orgs+n, time.Since(start).Round(time.Millisecond))

	// The exceptions, every one ending at the same second, far enough
	// ahead for the writes and the watch to be in place.
	end := time.Now().Add(time.Minute).Truncate(time.Second)
	writeStart := time.Now()
	if err := parallel(ctx, excepted, workers, func(ctx context.Context, i int) error {
		spec := []v1alpha1.ExceptionSpec{{Name: "waiver", Exclude: []string{"rolebindings/" + waived}, Reason: "bench " + tenant(i),
			RequestedBy: me.Status.UserInfo.Username, ExpiresAt: &metav1.Time{Time: end}}}
		value, _ := json.Marshal(spec)
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.AnnotationExceptions: string(value)}}})
		// A guard busy with its neighbours' writes may time out (the
		// failure policy refuses): written again, as a client would.
		var err error
		for range 5 {
			if _, err = kube.CoreV1().Namespaces().Patch(ctx, tenant(i*(n/excepted)), types.MergePatchType, patch, metav1.PatchOptions{}); err == nil ||
				!(apierrors.IsInternalError(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err)) {
				return err
			}
		}
		return err
	}); err != nil {
		return fmt.Errorf("writing the exceptions: %w", err)
	}
	fmt.Printf("%d exceptions written in %s, ending at %s\n", excepted, time.Since(writeStart).Round(time.Millisecond), end.Format(time.RFC3339))

	// Until every excepted view lacks the item, then watch from there.
	var rv string
	for {
		list, err := dyn.Resource(viewRB).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + waived})
		if err != nil {
			return err
		}
		if holding(list.Items) == 0 {
			rv = list.GetResourceVersion()
			break
		}
		if time.Now().After(end.Add(-5 * time.Second)) {
			return fmt.Errorf("the views never lost %q in the %d excepted namespaces before the end (%d items)", waived, excepted, len(list.Items))
		}
		time.Sleep(500 * time.Millisecond) // a poll of the views, twice a second
	}
	w, err := dyn.Resource(viewRB).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		return err
	}
	defer w.Stop()
	var (
		mu          sync.Mutex
		events      = map[watch.EventType]int{}
		added       = map[string]time.Time{}
		first, last time.Time
	)
	writesBefore, err2 := implicitMetrics(ctx, b, implicit)
	if err2 != nil {
		fmt.Printf("metrics: %v\n", err2)
	}
	deadline := time.NewTimer(time.Until(end) + 2*time.Minute)
	defer deadline.Stop()
loop:
	for {
		select {
		case ev, open := <-w.ResultChan():
			if !open {
				return fmt.Errorf("the watch ended after %d ADDED", len(added))
			}
			now := time.Now()
			mu.Lock()
			events[ev.Type]++
			if u, isObj := ev.Object.(*unstructured.Unstructured); isObj && ev.Type == watch.Added && u.GetName() == waived {
				added[u.GetNamespace()] = now
				if first.IsZero() {
					first = now
				}
				last = now
			}
			done := len(added) == excepted
			mu.Unlock()
			if done {
				break loop
			}
		case <-deadline.C:
			return fmt.Errorf("%d of %d views got %q back within 2 minutes of the end", len(added), excepted, waived)
		}
	}
	writesAfter, _ := implicitMetrics(ctx, b, implicit)
	// The end state, read afresh: every tenant's view holds the item.
	list, err := dyn.Resource(viewRB).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + waived})
	if err != nil {
		return err
	}
	var rows strings.Builder
	fmt.Fprintf(&rows, "| namespaces | exceptions | first view back | last view back | events on the -A watch (ADDED / MODIFIED / DELETED) | fresh list: excepted views holding it | expiry writes (server) |\n|---:|---:|---:|---:|---|---:|---|\n")
	fmt.Fprintf(&rows, "| %d | %d | %s | %s | %d / %d / %d | %d of %d | %s |\n", 1+orgs+n, excepted,
		first.Sub(end).Round(time.Millisecond), last.Sub(end).Round(time.Millisecond),
		events[watch.Added], events[watch.Modified], events[watch.Deleted], holding(list.Items), excepted, metricDelta(writesBefore, writesAfter))
	fmt.Print("\n" + rows.String())
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.outDir, "exceptions-expire.md"), []byte(rows.String()), 0o644); err != nil {
		return err
	}
	ok = true
	return nil
}

// expiryMetrics are the expiry writer's counters read before and after.
var expiryMetrics = []string{"implicit_exception_expiry_writes_total"}

func implicitMetrics(ctx context.Context, b *bench, p *controlplane.AggregatedServer) (map[string]float64, error) {
	s, err := b.newServer("implicit-apiserver", p.URL(), p.Process)
	if err != nil {
		return nil, err
	}
	return s.metrics(ctx, expiryMetrics...)
}

func metricDelta(before, after map[string]float64) string {
	var out []string
	for _, m := range expiryMetrics {
		out = append(out, fmt.Sprintf("%s +%.0f", m, after[m]-before[m]))
	}
	return strings.Join(out, ", ")
}
