package fleethub

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/component-base/metrics"

	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
)

var (
	lastReport = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "implicit",
		Name:           "fleet_member_last_report_timestamp_seconds",
		Help:           "Unix time of a member cluster's last report (its MemberCluster's status.reportTime) on this hub; absent before its first.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster"})
	memberStale = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "implicit",
		Name:           "fleet_member_stale",
		Help:           "1 while a member cluster reports that it can't read this hub (status.staleSince: it serves its last known sources), else 0.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster"})
	memberUnreported = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "implicit",
		Name:           "fleet_member_unreported",
		Help:           "1 while a registered member cluster has never reported to this hub (its MemberCluster has no status.reportTime), else 0: such a member has no last-report series.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster"})
	sourcesBehind = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "implicit",
		Name:           "fleet_member_sources_behind",
		Help:           "Hub sources a member cluster serves at a resourceVersion other than the hub's current one, or that the hub no longer has, by its last report.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"cluster"})
)

// RegisterMetrics registers the package's metrics with register (the
// server's wiring passes legacyregistry.MustRegister); once per process.
func RegisterMetrics(register func(...metrics.Registerable)) {
	registerOnce.Do(func() {
		register(lastReport, memberStale, memberUnreported, sourcesBehind)
	})
}

var registerOnce sync.Once

// HubSources answers what the hub holds now in its global namespace.
type HubSources interface {
	// SourceResourceVersion returns the current resourceVersion of the hub
	// source of resource ("resource.group") and name; found is false when
	// the hub has none.
	SourceResourceVersion(resource, name string) (rv string, found bool)
}

// Behind returns the sources of a member's report that differ from the
// hub's current ones: another resourceVersion, or a source the hub no
// longer has. The plugin's `fleet status` counts the same way.
func Behind(status fleetv1alpha1.MemberClusterStatus, hub HubSources) []fleetv1alpha1.SourceReport {
	var out []fleetv1alpha1.SourceReport
	for _, s := range status.Sources {
		if rv, found := hub.SourceResourceVersion(s.Resource, s.Name); !found || rv != s.ResourceVersion {
			out = append(out, s)
		}
	}
	return out
}

// RunMetrics sets the members' gauges every period until ctx is cancelled:
// the hub's sources change without an event of the reports, so the count
// behind is recomputed by time, not only on the reports' events.
func (t *Tracker) RunMetrics(ctx context.Context, hub HubSources, period time.Duration) {
	wait.UntilWithContext(ctx, func(context.Context) { t.SetMetrics(hub) }, period)
}

// SetMetrics sets the members' gauges from their last reports.
func (t *Tracker) SetMetrics(hub HubSources) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for name, m := range t.members {
		unreported := 1.0
		if m.status.ReportTime != nil {
			lastReport.WithLabelValues(name).Set(float64(m.status.ReportTime.Unix()))
			unreported = 0
		}
		memberUnreported.WithLabelValues(name).Set(unreported)
		stale := 0.0
		if m.status.StaleSince != nil {
			stale = 1
		}
		memberStale.WithLabelValues(name).Set(stale)
		sourcesBehind.WithLabelValues(name).Set(float64(len(Behind(m.status, hub))))
	}
}

// forgetMember drops a deleted member's series.
func forgetMember(name string) {
	lastReport.DeleteLabelValues(name)
	memberStale.DeleteLabelValues(name)
	memberUnreported.DeleteLabelValues(name)
	sourcesBehind.DeleteLabelValues(name)
}
