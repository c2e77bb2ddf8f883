package registry

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestSnapshotsBoundedInItems checks that the snapshots of one view
// resource hold at most maxSnapshotItems items together, not each: view
// items are distinct objects, so sixteen snapshots of an -A list of 100,000
// items each would pin sixteen times the memory of one.
func TestSnapshotsBoundedInItems(t *testing.T) {
	t.Parallel()
	clock := clocktesting.NewFakePassiveClock(time.Now())
	s := newSnapshots(clock)
	const n = maxSnapshotItems * 2 / 5
	put := func(rv string, size int) {
		s.put(snapshotKey{rv: rv, scope: "all"}, make([]runtime.Object, size), make([]string, size))
		clock.SetTime(clock.Now().Add(time.Second))
	}
	put("1", n)
	put("2", n)
	if got := s.itemCount(); got != 2*n {
		t.Fatalf("two snapshots of %d hold %d items", n, got)
	}
	put("3", n) // over the bound: the oldest goes
	if _, ok := s.get(snapshotKey{rv: "1", scope: "all"}); ok {
		t.Error("the oldest snapshot is kept past the item bound")
	}
	for _, rv := range []string{"2", "3"} {
		if _, ok := s.get(snapshotKey{rv: rv, scope: "all"}); !ok {
			t.Errorf("snapshot %s was dropped, though the two newest fit", rv)
		}
	}
	if got := s.itemCount(); got > maxSnapshotItems {
		t.Errorf("snapshots hold %d items, want at most %d", got, maxSnapshotItems)
	}
	put("4", maxSnapshotItems+1) // never kept
	if _, ok := s.get(snapshotKey{rv: "4", scope: "all"}); ok {
		t.Error("a snapshot larger than the bound is kept")
	}
	clock.SetTime(clock.Now().Add(snapshotTTL))
	if _, ok := s.get(snapshotKey{rv: "3", scope: "all"}); ok || s.itemCount() != 0 {
		t.Errorf("after the TTL: snapshot kept %t, %d items counted; want none", ok, s.itemCount())
	}
}
