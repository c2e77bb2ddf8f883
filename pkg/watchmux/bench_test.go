package watchmux_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

const (
	benchOrgs     = 100
	benchChildren = 100 // per org
	benchGlobals  = 100
)

// benchSize is the shape of a benchmark's mux: orgs × benchChildren tenant
// namespaces, plus the orgs, and globals global RoleBindings.
type benchSize struct{ orgs, globals int }

// benchSizes are the fan-out benchmark's shapes: the built-in one (10,100
// namespaces, 100 globals) and issue 15's target (101,000 namespaces,
// 1,000 globals).
var benchSizes = []benchSize{{benchOrgs, benchGlobals}, {1_000, 1_000}}

// benchChild is the name of child c of org o.
func benchChild(o, c int) string { return fmt.Sprintf("org-%03d-%02d", o, c) }

// benchRB returns a new version of the RoleBinding namespace/name.
func benchRB(namespace, name string, rv int) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(namespace + "/" + name), ResourceVersion: fmt.Sprint(rv)},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "org:viewers"}},
	}
}

// benchMux returns a synced mux of the global namespace, benchOrgs orgs with
// benchChildren children each (parent label), and benchGlobals global
// RoleBindings, fed as the informers would before they sync.
func benchMux() *watchmux.Mux { return benchMuxOf(benchSizes[0]) }

// benchMuxOf returns a synced mux of the given size, as benchMux.
func benchMuxOf(size benchSize) *watchmux.Mux {
	m := newMux(watchmux.Options{})
	m.OnNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: global}}, false)
	for o := range size.orgs {
		m.OnNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("org-%03d", o)}}, false)
		for c := range benchChildren {
			m.OnNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name:   benchChild(o, c),
				Labels: map[string]string{v1alpha1.LabelParent: fmt.Sprintf("org-%03d", o)},
			}}, false)
		}
	}
	for g := range size.globals {
		m.OnSource(rolebindings, benchRB(global, fmt.Sprintf("global-%d", g), 1), false)
	}
	m.MarkSynced()
	return m
}

// BenchmarkGlobalEditFanOut measures one edit of a global RoleBinding seen
// by 10,000 tenant namespaces (100 orgs × 100 children, plus the orgs), from
// the informer's event to the last single-namespace watcher holding its
// MODIFIED event. Each watcher is read by a goroutine of its own, as an
// HTTP watch would be.
//
//	go test -run '^$' -bench GlobalEdit -benchtime 3x ./pkg/watchmux/
func BenchmarkGlobalEditFanOut(b *testing.B) {
	for _, size := range benchSizes {
		for _, watchers := range []int{1_000, 10_000} {
			namespaces := size.orgs*(benchChildren+1) + 1
			b.Run(fmt.Sprintf("namespaces=%d/globals=%d/watchers=%d", namespaces, size.globals, watchers), func(b *testing.B) {
				benchGlobalEdit(b, size, watchers)
			})
		}
	}
}

// benchGlobalEdit is one case of BenchmarkGlobalEditFanOut.
func benchGlobalEdit(b *testing.B, size benchSize, watchers int) {
	m := benchMuxOf(size)
	ctx, cancel := context.WithCancel(context.Background())
	var (
		pending   sync.WaitGroup // events of the current edit not yet received
		consumers sync.WaitGroup
		delivered atomic.Int64
	)
	for i := range watchers {
		// Spread the watchers over every org.
		w, err := m.Watch(ctx, watchmux.WatchOptions{
			Resource: rolebindings, Namespace: benchChild(i%size.orgs, i/size.orgs%benchChildren), SendInitialEvents: ptr.To(false),
		})
		if err != nil {
			b.Fatal(err)
		}
		consumers.Add(1)
		go func() {
			defer consumers.Done()
			for range w.ResultChan() {
				delivered.Add(1)
				pending.Done()
			}
		}()
	}
	defer func() {
		cancel()
		consumers.Wait()
	}()
	start := currentRV(b, m)
	rv := 1
	b.ReportAllocs()
	for b.Loop() {
		rv++
		pending.Add(watchers)
		m.OnSource(rolebindings, benchRB(global, "global-0", rv), false)
		pending.Wait()
	}
	n := float64(delivered.Load())
	b.ReportMetric(n/float64(b.N), "events/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/event")
	b.ReportMetric(float64(currentRV(b, m)-start)/float64(b.N), "view-events/op")
}

// BenchmarkMuxHeap measures the time to build a synced mux of 10,000
// tenant namespaces (100 orgs × 100 children) and 100 global RoleBindings,
// and the heap it holds: "heap-MB" as built, "heap-full-history-MB" after
// enough global edits (10 × 10,101 view events) to fill the default history
// of 100,000 events. Source and Namespace objects the mux points to are
// counted; in a server the informers' caches share them.
//
//	go test -run '^$' -bench MuxHeap -benchtime 3x ./pkg/watchmux/
func BenchmarkMuxHeap(b *testing.B) {
	var m *watchmux.Mux
	var before, built, full runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for b.Loop() {
		m = nil
		m = benchMux()
	}
	runtime.GC()
	runtime.ReadMemStats(&built)
	for i := range 10 {
		m.OnSource(rolebindings, benchRB(global, "global-0", i+2), false)
	}
	runtime.GC()
	runtime.ReadMemStats(&full)
	runtime.KeepAlive(m)
	b.ReportMetric(float64(int64(built.HeapAlloc)-int64(before.HeapAlloc))/1e6, "heap-MB")
	b.ReportMetric(float64(int64(full.HeapAlloc)-int64(before.HeapAlloc))/1e6, "heap-full-history-MB")
}
