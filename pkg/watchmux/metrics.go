package watchmux

import (
	"sync"

	"k8s.io/component-base/metrics"

	"github.com/implicit-dev/implicit-apiserver/internal/renamedmetric"
)

const (
	fanOutHelp       = "Time from a source or namespace event's arrival to its view events enqueued for the last affected watcher."
	openWatchersHelp = "Open watches on views."
	slowClosedHelp   = "Watches closed because they could not keep up."
)

var fanOutBuckets = metrics.ExponentialBuckets(0.0001, 4, 10)

var (
	resumedFromVector = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "implicit",
		Subsystem:      "watch",
		Name:           "resumed_from_sources_total",
		Help:           "Watches resumed from a version this instance has no history for (another replica's, an earlier run's), by the difference with the sources listed at its revisions.",
		StabilityLevel: metrics.ALPHA,
	})
	pastStates = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "implicit",
		Subsystem:      "watch",
		Name:           "past_states_total",
		Help:           "Watches and lists that needed the sources at a past version, by result: admitted (a cache miss listed them in the requester's turn), refused (the requester's turn did not come: 429), cached (the caches of past states and lists held them: no list, no turn), other_namespace (the version names a namespace since deleted and created again: 410).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
	resumeFailures = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "implicit",
		Subsystem:      "watch",
		Name:           "resume_failures_total",
		Help:           "Watches from a version without history that could not be served (the sources' revisions compacted, no exact lister): answered 410 Gone.",
		StabilityLevel: metrics.ALPHA,
	})
	// The watch subsystem's names were implicit_fanout_duration_seconds,
	// implicit_watchers and implicit_slow_watchers_closed_total: kept, as
	// deprecated, for one release (internal/renamedmetric).
	fanOutLatency = renamedmetric.Histogram{
		New: metrics.NewHistogram(&metrics.HistogramOpts{
			Namespace:      "implicit",
			Subsystem:      "watch",
			Name:           "fanout_duration_seconds",
			Help:           fanOutHelp,
			Buckets:        fanOutBuckets,
			StabilityLevel: metrics.ALPHA,
		}),
		Old: metrics.NewHistogram(&metrics.HistogramOpts{
			Namespace:      "implicit",
			Name:           "fanout_duration_seconds",
			Help:           renamedmetric.Help("implicit_watch_fanout_duration_seconds", fanOutHelp),
			Buckets:        fanOutBuckets,
			StabilityLevel: metrics.ALPHA,
		}),
	}
	openWatchers = renamedmetric.Gauge{
		New: metrics.NewGauge(&metrics.GaugeOpts{
			Namespace:      "implicit",
			Subsystem:      "watch",
			Name:           "open_watchers",
			Help:           openWatchersHelp,
			StabilityLevel: metrics.ALPHA,
		}),
		Old: metrics.NewGauge(&metrics.GaugeOpts{
			Namespace:      "implicit",
			Name:           "watchers",
			Help:           renamedmetric.Help("implicit_watch_open_watchers", openWatchersHelp),
			StabilityLevel: metrics.ALPHA,
		}),
	}
	slowWatchersClosed = renamedmetric.Counter{
		New: metrics.NewCounter(&metrics.CounterOpts{
			Namespace:      "implicit",
			Subsystem:      "watch",
			Name:           "slow_watchers_closed_total",
			Help:           slowClosedHelp,
			StabilityLevel: metrics.ALPHA,
		}),
		Old: metrics.NewCounter(&metrics.CounterOpts{
			Namespace:      "implicit",
			Name:           "slow_watchers_closed_total",
			Help:           renamedmetric.Help("implicit_watch_slow_watchers_closed_total", slowClosedHelp),
			StabilityLevel: metrics.ALPHA,
		}),
	}
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

// RegisterMetrics registers the package's metrics with register (the
// server's wiring passes legacyregistry.MustRegister); once per process,
// later calls do nothing.
func RegisterMetrics(register func(...metrics.Registerable)) {
	registerOnce.Do(func() {
		register(resumedFromVector, pastStates, resumeFailures, fanOutLatency.New, fanOutLatency.Old, openWatchers.New, openWatchers.Old,
			slowWatchersClosed.New, slowWatchersClosed.Old, eventsDelivered, sourceObjects, candidates, candidateNamespaces,
			historyEvents, historyBytes)
	})
}

var registerOnce sync.Once
