package authz

import (
	"sync"

	"k8s.io/component-base/metrics"

	"github.com/implicit-dev/implicit-apiserver/internal/renamedmetric"
)

const cachedHelp = "Authorization decisions answered from the decision cache."

var (
	// decisions is superseded by implicit_authorize_decisions_total, which
	// the server counts where the answer is written (pkg/webhook), beside the
	// request latency: kept, as deprecated, for one release.
	decisions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "implicit",
		Name:           "authorization_decisions_total",
		Help:           renamedmetric.Help("implicit_authorize_decisions_total", "Authorization webhook answers, by decision (allowed, no_opinion, error)."),
		StabilityLevel: metrics.ALPHA,
	}, []string{"decision"})
	// decisionsCached was named implicit_authorization_decisions_cached_total.
	decisionsCached = renamedmetric.Counter{
		New: metrics.NewCounter(&metrics.CounterOpts{
			Namespace:      "implicit",
			Subsystem:      "authorize",
			Name:           "decisions_cached_total",
			Help:           cachedHelp,
			StabilityLevel: metrics.ALPHA,
		}),
		Old: metrics.NewCounter(&metrics.CounterOpts{
			Namespace:      "implicit",
			Name:           "authorization_decisions_cached_total",
			Help:           renamedmetric.Help("implicit_authorize_decisions_cached_total", cachedHelp),
			StabilityLevel: metrics.ALPHA,
		}),
	}
)

// The audit of candidates (audit.go).
var (
	differences = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "implicit",
		Name:      "candidate_audit_differences_total",
		Help: "Requests the authorization webhook answered that an open candidate would answer otherwise, " +
			"by the candidate's resource and direction (would_deny, would_allow). Each replica counts the requests it answered.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource", "direction"})
	candidateAudits = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "implicit",
		Name:           "candidate_audits",
		Help:           "Candidates whose audit records this replica holds in memory; a candidate's records are dropped once it is gone.",
		StabilityLevel: metrics.ALPHA,
	})
)

// RegisterMetrics registers the package's metrics with register (the
// server's wiring passes legacyregistry.MustRegister); once per process,
// later calls do nothing.
func RegisterMetrics(register func(...metrics.Registerable)) {
	registerOnce.Do(func() {
		register(decisions, decisionsCached.New, decisionsCached.Old, differences, candidateAudits)
	})
}

var registerOnce sync.Once
