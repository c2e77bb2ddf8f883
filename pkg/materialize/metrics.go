package materialize

import (
	"sync"

	"k8s.io/component-base/metrics"
)

var (
	lag = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace: "implicit",
		Name:      "materialize_lag_seconds",
		Help: "Time from a change of a namespace's materialized view (as the materializer learns of it) " +
			"to the last copy written in that namespace.",
		Buckets:        metrics.ExponentialBuckets(0.01, 2, 16),
		StabilityLevel: metrics.ALPHA,
	})
	pending = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "implicit",
		Name:           "materialize_pending_namespaces",
		Help:           "Namespaces whose copies are not yet compared with their changed views.",
		StabilityLevel: metrics.ALPHA,
	})
	writes = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "implicit",
		Name:           "materialize_writes_total",
		Help:           "Writes of materialized copies, by resource and operation (create, update, delete).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource", "operation"})
	driftRepaired = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "implicit",
		Name:           "materialize_drift_repaired_total",
		Help:           "Copies changed or deleted behind the guards and written again, by resource.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})
	conflicts = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "implicit",
		Name:           "materialize_conflicts_total",
		Help:           "Inherited items not materialized because a tenant object holds their name, by resource.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})
)

// RegisterMetrics registers the package's metrics with register (the
// server's wiring passes legacyregistry.MustRegister); once per process,
// later calls do nothing.
func RegisterMetrics(register func(...metrics.Registerable)) {
	registerOnce.Do(func() {
		register(lag, pending, writes, driftRepaired, conflicts)
	})
}

var registerOnce sync.Once
