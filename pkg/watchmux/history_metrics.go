package watchmux

import (
	"k8s.io/component-base/metrics"
)

// The watch history's size, for operators sizing --history-bytes and for
// test/bench's replica switch (the memory a replica keeps to resume its own
// versions without asking kube-apiserver).
var (
	historyEvents = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "implicit",
		Subsystem:      "watch",
		Name:           "history_events",
		Help:           "View events kept in the watch history, to resume watches from this instance's versions.",
		StabilityLevel: metrics.ALPHA,
	})
	historyBytes = metrics.NewGauge(&metrics.GaugeOpts{
		Namespace:      "implicit",
		Subsystem:      "watch",
		Name:           "history_bytes",
		Help:           "Estimated bytes the watch history's events pin (the bound is --history-bytes): each object charged once, of the order of its serialized size.",
		StabilityLevel: metrics.ALPHA,
	})
)

// reportLocked publishes the history's size.
func (h *history) reportLocked() {
	historyEvents.Set(float64(h.n))
	historyBytes.Set(float64(h.bytes))
}
