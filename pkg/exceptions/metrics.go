package exceptions

import (
	"sync"

	"k8s.io/component-base/metrics"
)

// The results of an expiry write (implicit_exception_expiry_writes_total).
const (
	// resultWritten: this replica wrote the mark.
	resultWritten = "written"
	// resultConflict: the namespace changed under the write (another
	// replica's mark, a tenant's edit); it is re-read and recomputed.
	resultConflict = "conflict"
	// resultDone: re-read after a conflict, nothing was left to write.
	resultDone = "done"
	// resultError: any other failure; retried with backoff.
	resultError = "error"
)

var (
	exceptionsGauge = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "implicit",
		Name:           "exceptions",
		Help:           "Exceptions declared on namespaces, by state (Requested, Active, Expired).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"state"})
	expiringSoon = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "implicit",
		Name:           "exceptions_expiring_soon",
		Help:           "Exceptions in effect whose end is within --exception-warning-window.",
		StabilityLevel: metrics.ALPHA,
	})
	expiryWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "implicit",
		Name:           "exception_expiry_writes_total",
		Help:           "Writes of namespaces' implicit.dev/exceptions-expired marks, by result (written, conflict, done, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
)

// RegisterMetrics registers the package's metrics with register (the
// server's wiring passes legacyregistry.MustRegister); once per process,
// later calls do nothing.
func RegisterMetrics(register func(...metrics.Registerable)) {
	registerOnce.Do(func() {
		register(exceptionsGauge, expiringSoon, expiryWrites)
	})
}

var registerOnce sync.Once
