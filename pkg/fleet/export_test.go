package fleet

import "k8s.io/component-base/metrics"

// ReportFailures is the failure counter of reason, for tests.
func ReportFailures(reason string) metrics.CounterMetric {
	return reportFailures.WithLabelValues(reason)
}
