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

func init() {
	legacyregistry.MustRegister(decisions, decisionsCached)
}
