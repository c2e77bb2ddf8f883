package watchmux

import (
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	resumedFromVector = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "implicit",
		Name:           "watch_resumed_from_sources_total",
		Help:           "Watches resumed from a version this instance has no history for (another replica's, an earlier run's), by the difference with the sources listed at its revisions.",
		StabilityLevel: metrics.ALPHA,
	})
	resumeFailures = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "implicit",
		Name:           "watch_resume_failures_total",
		Help:           "Watches from a version without history that could not be served (the sources' revisions compacted, no exact lister): answered 410 Gone.",
		StabilityLevel: metrics.ALPHA,
	})
	fanOutLatency = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      "implicit",
		Name:           "fanout_duration_seconds",
		Help:           "Time from a source or namespace event's arrival to its view events enqueued for the last affected watcher.",
		Buckets:        metrics.ExponentialBuckets(0.0001, 4, 10),
		StabilityLevel: metrics.ALPHA,
	})
	openWatchers = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "implicit",
		Name:           "watchers",
		Help:           "Open watches on views.",
		StabilityLevel: metrics.ALPHA,
	})
	slowWatchersClosed = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "implicit",
		Name:           "slow_watchers_closed_total",
		Help:           "Watches closed because they could not keep up.",
		StabilityLevel: metrics.ALPHA,
	})
	eventsDelivered = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "implicit",
		Name:           "watch_events_delivered_total",
		Help:           "View events handed to watch clients.",
		StabilityLevel: metrics.ALPHA,
	})
	sourceObjects = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "implicit",
		Name:           "source_objects",
		Help:           "Source objects held, by resource.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})
	candidates = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "implicit",
		Name:           "candidates",
		Help:           "Open candidates (staged versions of sources, implicit.dev/candidate-for), malformed ones included, by resource.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})
	candidateNamespaces = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "implicit",
		Name:           "candidate_namespaces",
		Help:           "Namespaces whose view shows at least one item built from a candidate, by resource.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"resource"})
)

func init() {
	legacyregistry.MustRegister(resumedFromVector, resumeFailures, fanOutLatency, openWatchers, slowWatchersClosed, eventsDelivered, sourceObjects, candidates, candidateNamespaces)
}
