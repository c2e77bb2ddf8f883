package watchmux_test

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

const benchChainLength = 2_000

// benchChainNS is the name of namespace i of the chain: chain-0000 is the
// root, chain-i's parent is chain-(i-1).
func benchChainNS(i int) string { return fmt.Sprintf("chain-%04d", i) }

// benchChainMux returns a synced mux of the global namespace, a chain of
// benchChainLength namespaces, each the parent of the next, and
// benchGlobals global RoleBindings, with the hierarchy depth capped at
// maxDepth (0: no cap).
func benchChainMux(maxDepth int) *watchmux.Mux {
	p := policy()
	p.MaxDepth = maxDepth
	m := watchmux.New(p, []string{rolebindings}, &objects{}, watchmux.Options{})
	m.OnNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: global}}, false)
	for i := range benchChainLength {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchChainNS(i), Labels: map[string]string{}, Annotations: map[string]string{}}}
		if i > 0 {
			ns.Labels[v1alpha1.LabelParent] = benchChainNS(i - 1)
		}
		m.OnNamespace(ns, false)
	}
	for g := range benchGlobals {
		m.OnSource(rolebindings, benchRB(global, fmt.Sprintf("global-%d", g), 1), false)
	}
	m.MarkSynced()
	return m
}

// BenchmarkDeepChain measures changes in a chain of 2,000 namespaces, with
// the default depth cap (32) and without one (0), the state before the cap
// existed:
//
//	go test -run '^$' -bench DeepChain -benchtime 20x ./pkg/watchmux/
//
// global-edit is one edit of a global RoleBinding, which every namespace's
// view shows. OnSource is timed from the informer's event to its return.
// With no watcher (watchers=0) the fan-out after the write lock is released
// has nothing to do, so the time is the write-lock hold plus the version
// stamping: this is the figure of docs/benchmarks.md. With an
// all-namespaces watcher draining its events (watchers=1), the time also
// covers handing it the 2,001 events, and bounds the hold from above.
//
// global-edit-cold is the same edit as the first change a new mux sees,
// before it has cached any namespace's lineage (after a start).
//
// root-exclusion is a change of the root namespace's exclusions, whose
// subtree is the whole chain; with the cap only the 33 namespaces that
// inherit from the root are recomputed.
//
// cpu-ns/op is the process's CPU time per operation, which other processes
// on the machine's 2 shared cores inflate less than ns/op.
func BenchmarkDeepChain(b *testing.B) {
	for _, maxDepth := range []int{0, 32} {
		for _, watchers := range []int{0, 1} {
			b.Run(fmt.Sprintf("global-edit/maxDepth=%d/watchers=%d", maxDepth, watchers), func(b *testing.B) {
				m := benchChainMux(maxDepth)
				ctx, cancel := context.WithCancel(context.Background())
				var (
					pending   sync.WaitGroup // events of the current edit not yet received
					consumers sync.WaitGroup
				)
				for range watchers {
					w, err := m.Watch(ctx, watchmux.WatchOptions{Resource: rolebindings, SendInitialEvents: ptr.To(false)})
					if err != nil {
						b.Fatal(err)
					}
					consumers.Add(1)
					go func() {
						defer consumers.Done()
						for range w.ResultChan() {
							pending.Done()
						}
					}()
				}
				defer func() {
					cancel()
					consumers.Wait()
				}()
				rv := 1
				start := currentRV(b, m)
				cpu := processCPU(b)
				for b.Loop() {
					rv++
					pending.Add(watchers * (benchChainLength + 1))
					m.OnSource(rolebindings, benchRB(global, "global-0", rv), false)
					pending.Wait()
				}
				b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
				b.ReportMetric(float64(currentRV(b, m)-start)/float64(b.N), "view-events/op")
			})
		}
		b.Run(fmt.Sprintf("global-edit-cold/maxDepth=%d", maxDepth), func(b *testing.B) {
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				m := benchChainMux(maxDepth)
				b.StartTimer()
				before := processCPU(b)
				m.OnSource(rolebindings, benchRB(global, "global-0", 2), false)
				cpu += processCPU(b) - before
			}
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
		b.Run(fmt.Sprintf("root-exclusion/maxDepth=%d", maxDepth), func(b *testing.B) {
			m := benchChainMux(maxDepth)
			exclusions := []string{"rolebindings/global-0", "rolebindings/global-1"}
			i := 0
			start := currentRV(b, m)
			cpu := processCPU(b)
			for b.Loop() {
				i++
				m.OnNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
					Name:        benchChainNS(0),
					Labels:      map[string]string{},
					Annotations: map[string]string{v1alpha1.AnnotationExclude: exclusions[i%2]},
				}}, false)
			}
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(currentRV(b, m)-start)/float64(b.N), "view-events/op")
		})
	}
}

// processCPU is the CPU time the process has used, user and system, in
// nanoseconds: per operation, a figure that other processes sharing the
// machine's cores inflate less than ns/op (it includes the garbage
// collector's work, on any thread).
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
