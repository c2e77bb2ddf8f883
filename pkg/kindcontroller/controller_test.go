package kindcontroller

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/component-base/metrics/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestSetKindState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		states []string
		want   map[string]float64
	}{
		{name: "served", states: []string{"served"}, want: map[string]float64{"served": 1, "waiting": 0, "invalid": 0}},
		{name: "waiting", states: []string{"waiting"}, want: map[string]float64{"served": 0, "waiting": 1, "invalid": 0}},
		{name: "invalid", states: []string{"invalid"}, want: map[string]float64{"served": 0, "waiting": 0, "invalid": 1}},
		{name: "waiting, then served", states: []string{"waiting", "served"}, want: map[string]float64{"served": 1, "waiting": 0, "invalid": 0}},
		{name: "served, then invalid", states: []string{"served", "invalid"}, want: map[string]float64{"served": 0, "waiting": 0, "invalid": 1}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A resource of its own: the gauge is the process's.
			gvr := schema.GroupVersionResource{Group: "state.example.com", Version: "v1", Resource: fmt.Sprintf("kinds%d", i)}
			for _, s := range tc.states {
				setKindState(gvr, s)
			}
			for state, want := range tc.want {
				got, err := testutil.GetGaugeMetricValue(configuredKinds.WithLabelValues(gvr.String(), state))
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("%s %s = %v, want %v", gvr, state, got, want)
				}
			}
		})
	}
}

// TestLogThrottle: a waiting kind's condition is logged when it is new or
// changes, not on every poll.
func TestLogThrottle(t *testing.T) {
	t.Parallel()
	var l logThrottle
	steps := []struct {
		name     string
		resource string
		message  string
		want     bool
	}{
		{name: "first", resource: "guardrails", message: "no CRD yet", want: true},
		{name: "repeated", resource: "guardrails", message: "no CRD yet", want: false},
		{name: "another kind", resource: "widgets", message: "no CRD yet", want: true},
		{name: "changed", resource: "guardrails", message: "no schema yet", want: true},
		{name: "changed again, repeated", resource: "guardrails", message: "no schema yet", want: false},
	}
	for _, s := range steps {
		if got := l.due(s.resource, s.message); got != s.want {
			t.Errorf("%s: due = %v, want %v", s.name, got, s.want)
		}
	}
}

// TestLogThrottleRepeats: an unchanged condition is logged again once
// repeatEvery has passed, on the injected clock.
func TestLogThrottleRepeats(t *testing.T) {
	t.Parallel()
	fake := clocktesting.NewFakeClock(time.Now())
	l := logThrottle{clock: fake}
	if !l.due("guardrails", "no CRD yet") {
		t.Fatal("first: due = false, want true")
	}
	fake.Step(repeatEvery - time.Second)
	if l.due("guardrails", "no CRD yet") {
		t.Error("before repeatEvery: due = true, want false")
	}
	fake.Step(time.Second)
	if !l.due("guardrails", "no CRD yet") {
		t.Error("after repeatEvery: due = false, want true")
	}
	if l.due("guardrails", "no CRD yet") {
		t.Error("just logged again: due = true, want false")
	}
}
