package renamedmetric

import (
	"k8s.io/component-base/metrics"
)

// Help is the old name's HELP: the new one's, marked deprecated.
func Help(newName, help string) string {
	return "(Deprecated: renamed " + newName + "; this name goes in the next release) " + help
}

// Counter writes a counter under its new and old names.
type Counter struct{ New, Old *metrics.Counter }

// Inc increments both.
func (c Counter) Inc() { c.New.Inc(); c.Old.Inc() }

// Gauge writes a gauge under its new and old names.
type Gauge struct{ New, Old *metrics.Gauge }

// Inc increments both.
func (g Gauge) Inc() { g.New.Inc(); g.Old.Inc() }

// Dec decrements both.
func (g Gauge) Dec() { g.New.Dec(); g.Old.Dec() }

// Histogram observes under its new and old names.
type Histogram struct{ New, Old *metrics.Histogram }

// Observe observes v in both.
func (h Histogram) Observe(v float64) { h.New.Observe(v); h.Old.Observe(v) }

// GaugeVec writes a gauge vector under its new and old names.
type GaugeVec struct{ New, Old *metrics.GaugeVec }

// WithLabelValues returns both gauges of the label values.
func (g GaugeVec) WithLabelValues(lvs ...string) GaugeSetter {
	return GaugeSetter{g.New.WithLabelValues(lvs...), g.Old.WithLabelValues(lvs...)}
}

// GaugeSetter sets one labeled gauge under both names.
type GaugeSetter struct{ New, Old metrics.GaugeMetric }

// Set sets both.
func (g GaugeSetter) Set(v float64) { g.New.Set(v); g.Old.Set(v) }
