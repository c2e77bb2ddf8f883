package watchmux_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/component-base/metrics/legacyregistry"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// metricValue reads a counter or gauge of the legacy registry, summed over
// its labels.
func metricValue(t *testing.T, name string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		var sum float64
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
		return sum
	}
	return 0
}

// TestSlowWatchers checks that watchers nobody reads from are closed once
// the fan-out's shared budget is spent, and that meanwhile another watcher
// receives every event. The budget runs on a fake clock: the test steps it.
func TestSlowWatchers(t *testing.T) {
	// Not parallel: it reads a process-wide counter.
	const budget = 100 * time.Millisecond
	clock := clocktesting.NewFakeClock(time.Now())
	m := newMux(watchmux.Options{BufferSize: 1, SlowBudget: budget, Clock: clock})
	for _, s := range hierarchy() {
		s(m)
	}
	m.MarkSynced()
	closedBefore := metricValue(t, "implicit_watch_slow_watchers_closed_total")

	// Two stuck watchers of solo. Their Matches tells when their goroutine
	// has taken an event from the buffer: it then waits for a reader that
	// never comes, so one more event fills the buffer of 1 and the next
	// doesn't fit.
	stuck := func() (watch.Interface, chan struct{}) {
		taken := make(chan struct{}, 10)
		w, err := m.Watch(t.Context(), watchmux.WatchOptions{
			Resource: rolebindings, Namespace: "solo", SendInitialEvents: ptr.To(false),
			Matches: func(runtime.Object) bool { taken <- struct{}{}; return true },
		})
		if err != nil {
			t.Fatal(err)
		}
		return w, taken
	}
	stuck1, taken1 := stuck()
	stuck2, taken2 := stuck()
	reader := watchAndFollow(t, m, watchmux.WatchOptions{SendInitialEvents: ptr.To(false)})
	// A watcher of another namespace is never waited for.
	other := watchAndFollow(t, m, watchmux.WatchOptions{Namespace: "org", SendInitialEvents: ptr.To(false)})

	putRB("solo", "a")(m)
	<-taken1
	<-taken2
	putRB("solo", "b")(m)
	// The third event waits for the stuck watchers: feed it from a goroutine.
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		putRB("solo", "c")(m)
	}()
	// Non-blocking sends come first: the reader has the third event while
	// the fan-out still waits for the stuck ones.
	reader.waitFor(t, 3)
	testwait.For(t, "the fan-out waits on its budget", clock.HasWaiters)
	select {
	case <-fed:
		t.Fatal("the fan-out did not wait for the stuck watchers")
	default:
	}
	// While the fan-out waits, and a next change waits for its turn, reads
	// go on: neither holds the state lock. Reads go on until one sees the
	// next change's version: that change has then released the lock and
	// waits for its turn (it cannot fan out before the budget is stepped).
	before := currentRV(t, m)
	next := make(chan struct{})
	go func() {
		defer close(next)
		putRB("org", "while-waiting")(m)
	}()
	testwait.For(t, "a read to see the version of the change waiting for its turn", func() bool {
		type result struct {
			rv  string
			err error
		}
		read := make(chan result, 1)
		go func() {
			rv, err := m.Read(func(r watchmux.Reader) { r.Results(rolebindings, "solo", "") })
			read <- result{rv, err}
		}()
		select {
		case r := <-read:
			if r.err != nil {
				t.Fatal(r.err)
			}
			return parseRV(t, r.rv) > before
		case <-time.After(waitTimeout):
			t.Fatal("a read waited for a fan-out blocked on a slow watcher")
		}
		return false
	})
	select {
	case <-next:
		t.Fatal("the next change fanned out before the fan-out blocked on the stuck watchers ended")
	default:
	}
	clock.Step(budget)
	<-fed
	<-next

	// One budget for both: each is closed. Only now does anyone read them.
	for name, w := range map[string]*follower{"first": follow(t, stuck1), "second": follow(t, stuck2)} {
		w.waitClosed(t)
		if n := len(w.received()); n > 2 {
			t.Errorf("%s stuck watcher got %d events, at most 2 fit before it was closed", name, n)
		}
	}
	if got := metricValue(t, "implicit_watch_slow_watchers_closed_total") - closedBefore; got != 2 {
		t.Errorf("slow watchers closed metric grew by %v, want 2", got)
	}

	// Later changes flow to the others without waiting.
	for i := range 5 {
		putRB("solo", fmt.Sprintf("later-%d", i))(m)
	}
	putRB("org", "o1")(m)
	reader.waitFor(t, 3+4+5+4) // org/while-waiting and org/o1 reach org's subtree
	if g := describeEvents(other.waitFor(t, 2)); g[0] != "ADDED org/o1 local@org" || g[1] != "ADDED org/while-waiting local@org" {
		t.Errorf("other namespace's watcher got %q", g)
	}
	if reader.isClosed() || other.isClosed() {
		t.Error("a watcher that keeps up was closed")
	}
}

// TestSlowWatcherCatchesUp checks that a watcher whose buffer is full but
// which reads within the budget is not closed and misses nothing.
func TestSlowWatcherCatchesUp(t *testing.T) {
	t.Parallel()
	m := newMux(watchmux.Options{BufferSize: 1, SlowBudget: time.Minute})
	for _, s := range hierarchy() {
		s(m)
	}
	m.MarkSynced()
	w, err := m.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings, Namespace: "solo", SendInitialEvents: ptr.To(false)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	const n = 20
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		for i := range n {
			putRB("solo", strconv.Itoa(i))(m)
		}
	}()
	for i := range n {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("closed after %d events", i)
			}
			if g, want := describeEvent(ev), fmt.Sprintf("ADDED solo/%d local@solo", i); g != want {
				t.Errorf("event %d = %q, want %q", i, g, want)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("event %d did not come", i)
		}
		time.Sleep(time.Millisecond) // on purpose: slower than the feed, so the buffer fills
	}
	<-fed
}

func TestStop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// end ends the watch w started with ctx's cancel.
		end func(w interface{ Stop() }, cancel context.CancelFunc)
	}{
		{name: "Stop", end: func(w interface{ Stop() }, _ context.CancelFunc) { w.Stop() }},
		{name: "Stop twice", end: func(w interface{ Stop() }, _ context.CancelFunc) { w.Stop(); w.Stop() }},
		{name: "context cancelled", end: func(_ interface{ Stop() }, cancel context.CancelFunc) { cancel() }},
		{name: "context cancelled, then Stop", end: func(w interface{ Stop() }, cancel context.CancelFunc) { cancel(); w.Stop() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := syncedMux(t, watchmux.Options{BufferSize: 1})
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			w, err := m.Watch(ctx, watchmux.WatchOptions{Resource: rolebindings, Namespace: "solo"})
			if err != nil {
				t.Fatal(err)
			}
			f := follow(t, w)
			f.waitFor(t, 1) // solo/g1
			tt.end(w, cancel)
			f.waitClosed(t)
			// A stopped watcher is never waited for: these don't block.
			for i := range 5 {
				putRB("solo", strconv.Itoa(i))(m)
			}
			if n := len(f.received()); n != 1 {
				t.Errorf("got %d events, want only the initial one", n)
			}
		})
	}
}

func TestWatchWithCancelledContext(t *testing.T) {
	t.Parallel()
	m := syncedMux(t, watchmux.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	w, err := m.Watch(ctx, watchmux.WatchOptions{Resource: rolebindings})
	if err != nil {
		t.Fatal(err)
	}
	follow(t, w).waitClosed(t)
}

// TestRun checks that Run with no informers marks the mux synced at once,
// and that cancelling it ends Run and every watcher.
func TestRun(t *testing.T) {
	t.Parallel()
	m := newMux(watchmux.Options{})
	for _, s := range with(putRB(global, "g1")) {
		s(m)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	testwait.For(t, "Run marks the mux synced", m.HasSynced)
	var fs []*follower
	for _, ns := range []string{"", "solo", "org", "kube-system"} {
		fs = append(fs, watchAndFollow(t, m, watchmux.WatchOptions{Namespace: ns}))
	}
	// A watch whose own context outlives Run's is ended by Run all the same.
	w, err := m.Watch(context.Background(), watchmux.WatchOptions{Resource: rolebindings})
	if err != nil {
		t.Fatal(err)
	}
	fs = append(fs, follow(t, w))
	cancel()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return after its context was cancelled")
	}
	for _, f := range fs {
		f.waitClosed(t)
	}
}

// TestWatchAfterRunEnded asks for a watch once Run has ended every watcher,
// as a request accepted just before the server's shutdown does when it gets
// there after its resume, authorization or a wait for CPU: it is answered
// 429, to be retried elsewhere from the same version. A watcher registered
// then would never be ended, and the HTTP server's graceful shutdown would
// wait for it up to the request timeout (a replica took over 15 s to exit).
func TestWatchAfterRunEnded(t *testing.T) {
	t.Parallel()
	m := newMux(watchmux.Options{})
	for _, s := range with(putRB(global, "g1")) {
		s(m)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	testwait.For(t, "Run marks the mux synced", m.HasSynced)
	synced := rvText(currentRV(t, m))
	cancel()
	<-done
	for _, opts := range []watchmux.WatchOptions{
		{Resource: rolebindings},
		{Resource: rolebindings, Namespace: "solo", ResourceVersion: synced},
	} {
		w, err := m.Watch(context.Background(), opts)
		if err == nil {
			w.Stop()
			t.Errorf("watch %+v after Run ended: opened, and nothing would ever end it; want 429", opts)
			continue
		}
		if !apierrors.IsTooManyRequests(err) {
			t.Errorf("watch %+v after Run ended: %v; want 429", opts, err)
		}
		if d, ok := apierrors.SuggestsClientDelay(err); !ok || d != 1 {
			t.Errorf("watch %+v after Run ended: Retry-After %d (%v), want 1", opts, d, ok)
		}
	}
}
