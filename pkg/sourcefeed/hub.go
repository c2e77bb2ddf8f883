package sourcefeed

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

// RegisterMetrics registers the package's metrics (the hub's staleness)
// with register, once; the server's wiring calls it.
func RegisterMetrics(register func(...metrics.Registerable)) {
	registerOnce.Do(func() {
		register(hubStale)
	})
}

var registerOnce sync.Once

var hubStale = metrics.NewGaugeVec(&metrics.GaugeOpts{
	Namespace:      "implicit",
	Name:           "global_sources_stale",
	Help:           "1 while the hub cluster of the global sources is unreachable and its last known sources are served (fail-static), else 0.",
	StabilityLevel: metrics.ALPHA,
}, []string{"cluster"})

// HubHealth probes the hub cluster of the global sources. The informers keep
// serving the last sources they read while it is down (fail-static); this
// tells tenants, logs and metrics that they are stale.
type HubHealth struct {
	cluster string
	client  kubernetes.Interface
	period  time.Duration
	clock   clock.Clock

	mu      sync.Mutex
	since   time.Time // zero while reachable
	lastErr error
	reached bool
}

// NewHubHealth probes cluster's /readyz through client, on clk.
func NewHubHealth(cluster string, client kubernetes.Interface, clk clock.Clock) *HubHealth {
	hubStale.WithLabelValues(cluster).Set(0)
	return &HubHealth{cluster: cluster, client: client, period: 5 * time.Second, clock: clk}
}

// Run probes every period, on the clock, until ctx is cancelled.
func (h *HubHealth) Run(ctx context.Context) {
	wait.BackoffUntilWithContext(ctx, h.probe, wait.NewJitteredBackoffManager(h.period, 0, h.clock), true)
}

func (h *HubHealth) probe(ctx context.Context) {
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

// Stale implements views.Staleness: since when the hub's sources are
// stale, and whether they are.
func (h *HubHealth) Stale() (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.since, !h.since.IsZero()
}

// Unreached explains why the hub has never been read, for readiness; nil
// once it has been.
func (h *HubHealth) Unreached() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.reached {
		return nil
	}
	return h.lastErr
}
