package watchmux

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbac "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// BenchmarkResumeLockHold measures how long an -A resume from a version
// this replica has no history for holds Mux.mu's read lock (while it does,
// no change is applied): the client is one global edit behind, in a
// cluster of namespaces × globals (with a local RoleBinding in every
// namespace, "+locals": then no tenant holds the global view alone); the
// past state is already built (as from the cache of past states). It
// reports the hold (ms/hold: copying what the current views are merged
// from) and the work done without the lock (ms/unlocked: merging the past
// and current views, comparing them).
func BenchmarkResumeLockHold(b *testing.B) {
	for _, size := range []struct {
		namespaces, globals int
		locals              bool
	}{{1000, 100, false}, {10000, 100, false}, {10000, 100, true}} {
		name := fmt.Sprintf("%dx%d", size.namespaces, size.globals)
		if size.locals {
			name += "+locals"
		}
		b.Run(name, func(b *testing.B) {
			m, rb := lockHoldMux(size.namespaces, size.globals, size.locals)
			before, err := m.Read(func(Reader) {})
			if err != nil {
				b.Fatal(err)
			}
			m.OnSource("rolebindings", rb(7, 1), false)
			want, err := rv.Parse(before)
			if err != nil {
				b.Fatal(err)
			}
			m.mu.RLock()
			c := m.pastConfigLocked()
			m.mu.RUnlock()
			p, err := m.pastStateOf(context.Background(), c, want)
			if err != nil {
				b.Fatal(err)
			}
			opts := WatchOptions{Resource: "rolebindings"}
			var held, unlocked time.Duration
			events := 0
			for b.Loop() {
				start := time.Now()
				r := m.resumeEvents(p, want, opts)
				unlocked += time.Since(start)
				m.mu.RLock()
				start = time.Now()
				current := m.currentCopyLocked(opts.Resource)
				held += time.Since(start)
				m.mu.RUnlock()
				start = time.Now()
				events += len(r.eventsIn(current.build()))
				unlocked += time.Since(start)
			}
			b.ReportMetric(float64(held.Microseconds())/1000/float64(b.N), "ms/hold")
			b.ReportMetric(float64(unlocked.Microseconds())/1000/float64(b.N), "ms/unlocked")
			b.ReportMetric(float64(events)/float64(b.N), "events/op")
		})
	}
}

// lockHoldMux is a synced mux of namespaces tenants and globals global
// RoleBindings (and a local one in every tenant with locals), whose lists
// are those objects; rb(i, edit) is global i after edit edits.
func lockHoldMux(namespaces, globals int, locals bool) (*Mux, func(i, edit int) *rbac.RoleBinding) {
	m := New(merge.Policy{GlobalNamespace: "implicit-global"}, []string{"rolebindings"}, itemObjects{}, Options{})
	revision := 0
	next := func() string { revision++; return strconv.Itoa(revision) }
	var nsObjects, bindings []runtime.Object
	addNS := func(name string) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: next()}}
		nsObjects = append(nsObjects, ns)
		m.OnNamespace(ns, false)
	}
	binding := func(namespace, name string, edit int) *rbac.RoleBinding {
		return &rbac.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + namespace + "-" + name), ResourceVersion: next()},
			RoleRef:    rbac.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
			Subjects:   []rbac.Subject{{Kind: "User", Name: fmt.Sprintf("u-%d", edit)}},
		}
	}
	rb := func(i, edit int) *rbac.RoleBinding { return binding("implicit-global", fmt.Sprintf("g-%03d", i), edit) }
	addNS("implicit-global")
	for i := range namespaces {
		addNS(fmt.Sprintf("team-%05d", i))
		if locals {
			o := binding(fmt.Sprintf("team-%05d", i), "local", 0)
			bindings = append(bindings, o)
			m.OnSource("rolebindings", o, false)
		}
	}
	for i := range globals {
		o := rb(i, 0)
		bindings = append(bindings, o)
		m.OnSource("rolebindings", o, false)
	}
	m.SetNamespaceList(func(context.Context, string, string) ([]runtime.Object, error) { return nsObjects, nil })
	m.SetSourceList("rolebindings", "", func(context.Context, string, string) ([]runtime.Object, error) { return bindings, nil })
	m.MarkSynced()
	return m, rb
}

// BenchmarkWatchListLockHold measures how long a watch-list of every
// namespace (sendInitialEvents=true, an informer's first list) holds
// Mux.mu's read lock: "ms/hold-merged" merging every namespace's items
// under it (snapshotLocked, as every-namespace watch-lists did), "ms/hold"
// copying their inputs (currentCopyLocked, what they do now), and
// "ms/unlocked" merging the copy after the lock is released.
func BenchmarkWatchListLockHold(b *testing.B) {
	for _, size := range [][2]int{{1000, 100}, {10000, 100}} {
		b.Run(fmt.Sprintf("%dx%d", size[0], size[1]), func(b *testing.B) {
			m, _ := lockHoldMux(size[0], size[1], false)
			opts := WatchOptions{Resource: "rolebindings"}
			var merged, held, unlocked time.Duration
			events := 0
			for b.Loop() {
				m.mu.RLock()
				start := time.Now()
				all := m.snapshotLocked(opts, 1, "v1")
				merged += time.Since(start)
				start = time.Now()
				current := m.currentCopyLocked(opts.Resource)
				held += time.Since(start)
				m.mu.RUnlock()
				start = time.Now()
				fromCopy := snapshotOf(current.build(), opts, 1, "v1")
				unlocked += time.Since(start)
				if len(fromCopy) != len(all) {
					b.Fatalf("%d events from the copy, %d from the state", len(fromCopy), len(all))
				}
				events += len(fromCopy)
			}
			b.ReportMetric(float64(merged.Microseconds())/1000/float64(b.N), "ms/hold-merged")
			b.ReportMetric(float64(held.Microseconds())/1000/float64(b.N), "ms/hold")
			b.ReportMetric(float64(unlocked.Microseconds())/1000/float64(b.N), "ms/unlocked")
			b.ReportMetric(float64(events)/float64(b.N), "events/op")
		})
	}
}
