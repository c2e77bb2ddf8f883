package watchmux

import (
	"testing"

	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/component-base/metrics/testutil"
)

// TestHistoryGauges: the gauges follow the history as events are added and
// the oldest dropped. Not parallel: the gauges are the process's.
func TestHistoryGauges(t *testing.T) {
	gauges := func() (events, bytes float64) {
		t.Helper()
		e, err := testutil.GetGaugeMetricValue(historyEvents)
		if err != nil {
			t.Fatal(err)
		}
		b, err := testutil.GetGaugeMetricValue(historyBytes)
		if err != nil {
			t.Fatal(err)
		}
		return e, b
	}
	h := newHistory(3, 0, 100)
	if e, b := gauges(); e != 0 || b != 0 {
		t.Fatalf("a new history: gauges %v events, %v bytes, want 0 and 0", e, b)
	}
	for i := 1; i <= 5; i++ {
		h.addLocked(&Event{RV: uint64(100 + i), Type: watch.Added, Namespace: "a", Name: "x"})
		e, b := gauges()
		if want := min(i, 3); e != float64(want) || e != float64(h.lenLocked()) {
			t.Errorf("after %d events: gauge %v events, want %d", i, e, want)
		}
		if b != float64(h.bytesLocked()) || b <= 0 {
			t.Errorf("after %d events: gauge %v bytes, the history's estimate %d", i, b, h.bytesLocked())
		}
	}
}
