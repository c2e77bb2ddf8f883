package authz

import (
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	decisions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "implicit",
		Name:           "authorization_decisions_total",
		Help:           "Authorization webhook answers, by decision (allowed, no_opinion, error).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"decision"})
	decisionsCached = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "implicit",
		Name:           "authorization_decisions_cached_total",
		Help:           "Authorization decisions answered from the decision cache.",
		StabilityLevel: metrics.ALPHA,
	})
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

func init() {
	legacyregistry.MustRegister(decisions, decisionsCached, differences, candidateAudits)
}
