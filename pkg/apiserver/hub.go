package apiserver

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

var hubStale = metrics.NewGaugeVec(&metrics.GaugeOpts{
	Namespace:      "implicit",
	Name:           "global_sources_stale",
	Help:           "1 while the hub cluster of the global sources is unreachable and its last known sources are served (fail-static), else 0.",
	StabilityLevel: metrics.ALPHA,
}, []string{"cluster"})

// hubHealth probes the hub cluster of the global sources. The informers keep
// serving the last sources they read while it is down (fail-static); this
// tells tenants, logs and metrics that they are stale.
type hubHealth struct {
	cluster string
	client  kubernetes.Interface
	period  time.Duration
	clock   clock.Clock

	mu      sync.Mutex
	since   time.Time // zero while reachable
	lastErr error
	reached bool
}

func newHubHealth(cluster string, client kubernetes.Interface, clk clock.Clock) *hubHealth {
	hubStale.WithLabelValues(cluster).Set(0)
	return &hubHealth{cluster: cluster, client: client, period: 5 * time.Second, clock: clk}
}

// run probes every period, on the clock, until ctx is cancelled.
func (h *hubHealth) run(ctx context.Context) {
	wait.BackoffUntilWithContext(ctx, h.probe, wait.NewJitteredBackoffManager(h.period, 0, h.clock), true)
}

func (h *hubHealth) probe(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	err := h.client.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastErr = err
	switch {
	case err == nil && !h.since.IsZero():
		klog.InfoS("Hub cluster reachable again: global sources are current", "cluster", h.cluster, "staleFor", h.clock.Since(h.since).Round(time.Second))
		h.since = time.Time{}
		hubStale.WithLabelValues(h.cluster).Set(0)
	case err == nil:
		h.reached = true
	case !h.reached:
		// Not ready until the hub has been read once: say why, at every probe.
		klog.ErrorS(err, "Hub cluster not reached yet: not ready until its global sources have been read", "cluster", h.cluster)
	case h.since.IsZero():
		h.since = h.clock.Now()
		klog.ErrorS(err, "Hub cluster unreachable: serving the last known global sources (fail-static)", "cluster", h.cluster)
		hubStale.WithLabelValues(h.cluster).Set(1)
	}
	if err == nil {
		h.reached = true
	}
}

// stale implements views.Staleness.
func (h *hubHealth) stale() (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.since, !h.since.IsZero()
}

// unreached explains why the hub has never been read, for readiness.
func (h *hubHealth) unreached() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.reached {
		return nil
	}
	return h.lastErr
}
