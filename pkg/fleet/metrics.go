package fleet

import (
	"sync"

	"k8s.io/component-base/metrics"
)

var (
	reportFailures = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "implicit",
		Subsystem: "fleet",
		Name:      "report_failures_total",
		Help: "The member's reports to its hub that failed, by reason: not_registered (the hub's admin has not created " +
			"the member's MemberCluster), forbidden, or error.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	lastReport = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "implicit",
		Subsystem:      "fleet",
		Name:           "last_report_timestamp_seconds",
		Help:           "When the member last wrote its report to its hub (Unix seconds); 0 before the first.",
		StabilityLevel: metrics.ALPHA,
	})
)

// RegisterMetrics registers the package's metrics with register, once; the
// server's wiring calls it.
func RegisterMetrics(register func(...metrics.Registerable)) {
	registerOnce.Do(func() {
		register(reportFailures, lastReport)
	})
}

var registerOnce sync.Once
