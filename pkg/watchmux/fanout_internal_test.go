package watchmux

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// TestHealthyWatcherSurvivesStuckOne checks the fairness of closing slow
// watchers: a watcher whose buffer was full when a fan-out began, but which
// drained it while the fan-out spent the shared budget waiting on another
// watcher that never reads, gets its event and keeps watching. Only the
// watcher still full after the budget is closed.
//
// The stuck watcher watches every namespace, so the fan-out always waits on
// it first (watchers of every namespace come first): the healthy one is
// reached only once the budget is spent, the case a plain "close everyone
// left" gets wrong.
func TestHealthyWatcherSurvivesStuckOne(t *testing.T) {
	t.Parallel()
	const budget = 100 * time.Millisecond
	clock := clocktesting.NewFakeClock(time.Now())
	m := New(merge.Policy{GlobalNamespace: global}, []string{"rolebindings"}, itemObjects{},
		Options{BufferSize: 1, SlowBudget: budget, Clock: clock})
	for _, ns := range []string{global, "a", "b"} {
		m.OnNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, false)
	}
	m.MarkSynced()
	put := func(ns, name string) {
		m.OnSource("rolebindings", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, false)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	// The stuck watcher's goroutine takes one event and then never returns
	// from its filter: its buffer fills and stays full.
	stuckTook := make(chan struct{}, 1)
	stuckW, err := m.Watch(ctx, WatchOptions{Resource: "rolebindings", SendInitialEvents: ptr.To(false),
		Matches: func(runtime.Object) bool {
			select {
			case stuckTook <- struct{}{}:
			default:
			}
			<-ctx.Done()
			return false
		}})
	if err != nil {
		t.Fatal(err)
	}
	stuck := stuckW.(*watcher)

	// The healthy watcher's filter waits for a token on gate for each
	// event, so the test says when it reads; healthyTook tells when its
	// goroutine has taken an event from the buffer.
	gate := make(chan struct{})
	healthyTook := make(chan string, 100)
	healthyW, err := m.Watch(ctx, WatchOptions{Resource: "rolebindings", Namespace: "a", SendInitialEvents: ptr.To(false),
		Matches: func(obj runtime.Object) bool {
			healthyTook <- obj.(*rbacv1.RoleBinding).Name
			select {
			case <-gate:
			case <-ctx.Done():
			}
			return true
		}})
	if err != nil {
		t.Fatal(err)
	}
	healthy := healthyW.(*watcher)
	received := make(chan string, 100)
	go func() {
		defer close(received)
		for ev := range healthyW.ResultChan() {
			received <- ev.Object.(*rbacv1.RoleBinding).Name
		}
	}()
	wait := func(what string, ch <-chan string, want string) {
		t.Helper()
		select {
		case got := <-ch:
			if got != want {
				t.Fatalf("%s: got %q, want %q", what, got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: nothing came", what)
		}
	}

	put("a", "e1") // both take it and block in their filters
	<-stuckTook
	wait("healthy takes e1", healthyTook, "e1")
	put("a", "e2") // the healthy watcher's buffer (1) is full now
	if len(healthy.ch) != cap(healthy.ch) {
		t.Fatalf("healthy buffer %d/%d, want full", len(healthy.ch), cap(healthy.ch))
	}
	// Fill the stuck watcher's buffer with events of b, which only it sees.
	for i := 0; len(stuck.ch) < cap(stuck.ch); i++ {
		put("b", fmt.Sprintf("fill-%d", i))
	}

	// e3 finds both full: the fan-out waits on the stuck watcher first.
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		put("a", "e3")
	}()
	testwait.For(t, "the fan-out to wait on its budget", clock.HasWaiters)
	// Meanwhile the healthy watcher drains its buffer: it delivers e1 and
	// takes e2.
	gate <- struct{}{}
	wait("healthy delivers e1", received, "e1")
	wait("healthy takes e2", healthyTook, "e2")
	if len(healthy.ch) != 0 {
		t.Fatalf("healthy buffer %d, want drained", len(healthy.ch))
	}
	// The budget runs out while the fan-out waits on the stuck watcher.
	clock.Step(budget)
	select {
	case <-fed:
	case <-time.After(10 * time.Second):
		t.Fatal("the fan-out did not end after its budget")
	}
	select {
	case <-stuck.done:
	default:
		t.Error("the stuck watcher is still open after the budget")
	}
	select {
	case <-healthy.done:
		t.Fatal("the healthy watcher, which had room after the budget, was closed")
	default:
	}

	// It gets e3 and every later event, in order.
	close(gate)
	put("a", "e4")
	for _, want := range []string{"e2", "e3", "e4"} {
		wait("healthy delivers", received, want)
	}
	healthyW.Stop()
	for name := range received {
		t.Errorf("event %q after Stop", name)
	}
}

// TestBookmarkAfterStart checks which periodic bookmarks a watcher may
// get: none of a state before its start, by sequence and by vector (the
// vector moves without events), and across a change of the sources'
// layout only one of a later sequence.
func TestBookmarkAfterStart(t *testing.T) {
	t.Parallel()
	w := &watcher{startRV: 10, startVector: []uint64{5, 7}}
	tests := []struct {
		name   string
		seq    uint64
		vector []uint64
		want   bool
	}{
		{name: "the start itself", seq: 10, vector: []uint64{5, 7}, want: true},
		{name: "later, quiet views", seq: 10, vector: []uint64{6, 7}, want: true},
		{name: "later events", seq: 12, vector: []uint64{6, 9}, want: true},
		{name: "an earlier event", seq: 9, vector: []uint64{5, 7}, want: false},
		{name: "an earlier vector, no event since", seq: 10, vector: []uint64{5, 6}, want: false},
		{name: "another layout, no event since", seq: 10, vector: []uint64{5, 7, 1}, want: false},
		{name: "another layout, an event since", seq: 11, vector: []uint64{5, 7, 1}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := bookmarkAfterStart(tt.seq, tt.vector, w); got != tt.want {
				t.Errorf("bookmarkAfterStart(%d, %v) from (%d, %v) = %v, want %v", tt.seq, tt.vector, w.startRV, w.startVector, got, tt.want)
			}
		})
	}
}
