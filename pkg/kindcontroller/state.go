package kindcontroller

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/component-base/metrics"
	"k8s.io/utils/clock"
)

var configuredKinds = metrics.NewGaugeVec(&metrics.GaugeOpts{
	Namespace:      "implicit",
	Name:           "configured_kinds",
	Help:           "Configured source kinds by state: served, waiting (the host does not serve the kind or its schema yet), or invalid (see the log).",
	StabilityLevel: metrics.ALPHA,
}, []string{"resource", "state"})

// RegisterMetrics registers the package's metrics with register (the
// server's wiring passes legacyregistry.MustRegister); once per process,
// later calls do nothing.
func RegisterMetrics(register func(...metrics.Registerable)) {
	registerOnce.Do(func() {
		register(configuredKinds)
	})
}

var registerOnce sync.Once

func setKindState(gvr schema.GroupVersionResource, state string) {
	for _, s := range []string{"served", "waiting", "invalid"} {
		v := 0.0
		if s == state {
			v = 1
		}
		configuredKinds.WithLabelValues(gvr.String(), s).Set(v)
	}
}

// logThrottle says when a kind's repeated condition is worth a log line:
// when it is new or changed, and every repeatEvery while it lasts. Its zero
// value uses the real clock.
type logThrottle struct {
	clock clock.PassiveClock

	mu   sync.Mutex
	last map[string]loggedAt
}

type loggedAt struct {
	message string
	at      time.Time
}

// repeatEvery is how often an unchanged condition is logged again.
const repeatEvery = 5 * time.Minute

func (l *logThrottle) due(resource, message string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clock == nil {
		l.clock = clock.RealClock{}
	}
	now := l.clock.Now()
	if prev, ok := l.last[resource]; ok && prev.message == message && now.Sub(prev.at) < repeatEvery {
		return false
	}
	if l.last == nil {
		l.last = map[string]loggedAt{}
	}
	l.last[resource] = loggedAt{message: message, at: now}
	return true
}
