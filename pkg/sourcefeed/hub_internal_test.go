package sourcefeed

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
)

// fakeHub answers /readyz with 200 while up, else 500, and counts the probes.
type fakeHub struct {
	up     atomic.Bool
	probes atomic.Int32
}

func (h *fakeHub) start(t *testing.T) kubernetes.Interface {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			t.Errorf("unexpected request %s", r.URL)
		}
		h.probes.Add(1)
		if !h.up.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// TestHubHealthStaleSince: the hub is stale from the first failed probe
// after it was reached, on the injected clock, until a probe succeeds.
func TestHubHealthStaleSince(t *testing.T) {
	t.Parallel()
	hub := &fakeHub{}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := clocktesting.NewFakeClock(start)
	h := NewHubHealth("stale-since", hub.start(t), clock)
	ctx := context.Background()

	h.probe(ctx)
	if h.Unreached() == nil {
		t.Error("unreached = nil before the hub was ever read")
	}
	if _, stale := h.Stale(); stale {
		t.Error("stale before the hub was ever read: nothing was served from it")
	}

	hub.up.Store(true)
	h.probe(ctx)
	if err := h.Unreached(); err != nil {
		t.Errorf("unreached = %v after a good probe", err)
	}

	hub.up.Store(false)
	clock.Step(time.Minute)
	h.probe(ctx)
	clock.Step(time.Minute)
	h.probe(ctx)
	if since, stale := h.Stale(); !stale || !since.Equal(start.Add(time.Minute)) {
		t.Errorf("stale() = %v, %v; want stale since the first failed probe, %v", since, stale, start.Add(time.Minute))
	}

	hub.up.Store(true)
	h.probe(ctx)
	if since, stale := h.Stale(); stale || !since.IsZero() {
		t.Errorf("stale() = %v, %v after the hub came back; want current", since, stale)
	}
}

// TestHubHealthProbesOnTheClock: run probes at once, then once per period
// of the injected clock.
func TestHubHealthProbesOnTheClock(t *testing.T) {
	t.Parallel()
	hub := &fakeHub{}
	hub.up.Store(true)
	clock := clocktesting.NewFakeClock(time.Now())
	h := NewHubHealth("probes-on-the-clock", hub.start(t), clock)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		testwait.For(t, what, cond)
	}
	for want := int32(1); want <= 3; want++ {
		waitUntil("the next probe to wait on the clock", clock.HasWaiters)
		if got := hub.probes.Load(); got != want {
			t.Fatalf("%d probes, want %d", got, want)
		}
		clock.Step(h.period)
		waitUntil("the probe of the next period", func() bool { return hub.probes.Load() == want+1 })
	}
}
