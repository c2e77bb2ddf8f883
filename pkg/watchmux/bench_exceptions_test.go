package watchmux_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// BenchmarkExceptionsExpire measures issue 42's burst: 1,000 exceptions,
// each in its own tenant namespace of 10,101 (100 orgs × 100 children), all
// excepting the global RoleBinding global-0, marked expired by the server
// in the same second: 1,000 namespace writes, as the expiry writer sends
// them. One watcher per excepted namespace; an op is the whole burst, from
// the first write fed in to the last watcher holding its event. Ops
// alternate: the marks written (each view gets global-0 back: ADDED), then
// removed (excepted again: DELETED), so every op moves 1,000 views.
//
//	go test -run '^$' -bench ExceptionsExpire -benchtime 10x ./pkg/watchmux/
func BenchmarkExceptionsExpire(b *testing.B) {
	const excepted = 1_000
	m := benchMuxOf(benchSizes[0])
	spec := v1alpha1.ExceptionSpec{Name: "waiver", Exclude: []string{rolebindings + "/global-0"}, Reason: "bench", RequestedBy: "alice"}
	specJSON, _ := json.Marshal([]v1alpha1.ExceptionSpec{spec})
	expiredJSON, _ := json.Marshal(map[string]string{spec.Name: merge.ExceptionDigest(spec)})
	// namespaceOf is tenant i's namespace with the exception, expired or not.
	namespaceOf := func(i int, expired bool) *corev1.Namespace {
		o := i % benchOrgs
		ann := map[string]string{v1alpha1.AnnotationExceptions: string(specJSON)}
		if expired {
			ann[v1alpha1.AnnotationExceptionsExpired] = string(expiredJSON)
		}
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: benchChild(o, i/benchOrgs), Labels: map[string]string{v1alpha1.LabelParent: fmt.Sprintf("org-%03d", o)}, Annotations: ann,
		}}
	}
	for i := range excepted {
		m.OnNamespace(namespaceOf(i, false), false)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var (
		pending   sync.WaitGroup
		consumers sync.WaitGroup
		delivered atomic.Int64
		perView   = make([]atomic.Int64, excepted)
	)
	for i := range excepted {
		w, err := m.Watch(ctx, watchmux.WatchOptions{Resource: rolebindings, Namespace: namespaceOf(i, false).Name, SendInitialEvents: ptr.To(false)})
		if err != nil {
			b.Fatal(err)
		}
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			for range w.ResultChan() {
				delivered.Add(1)
				perView[i].Add(1)
				pending.Done()
			}
		}()
	}
	defer func() {
		cancel()
		consumers.Wait()
	}()
	expired := false
	var longest time.Duration
	for b.Loop() {
		expired = !expired
		pending.Add(excepted)
		start := time.Now()
		for i := range excepted {
			m.OnNamespace(namespaceOf(i, expired), false)
		}
		pending.Wait()
		longest = max(longest, time.Since(start))
	}
	for i := range excepted {
		if got := perView[i].Load(); got != int64(b.N) {
			b.Fatalf("view %d got %d events in %d bursts, want one per burst", i, got, b.N)
		}
	}
	b.ReportMetric(float64(delivered.Load())/float64(b.N), "events/op")
	b.ReportMetric(float64(longest.Milliseconds()), "max-ms")
}
