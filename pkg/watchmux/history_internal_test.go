package watchmux

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

func TestHistory(t *testing.T) {
	t.Parallel()
	const floor = 100
	all := func(*Event) bool { return true }
	inA := func(e *Event) bool { return e.Namespace == "a" }
	tests := []struct {
		name  string
		size  int
		added int // events 101, 102, ...; odd ones in namespace a
		since uint64
		keep  func(*Event) bool
		want  []uint64
		ok    bool
	}{
		{name: "empty, from the floor", size: 3, since: floor, keep: all, ok: true},
		{name: "empty, below the floor", size: 3, since: floor - 1, keep: all},
		{name: "from the floor", size: 3, added: 2, since: floor, keep: all, want: []uint64{101, 102}, ok: true},
		{name: "from the last event", size: 3, added: 2, since: 102, keep: all, ok: true},
		{name: "from the middle", size: 3, added: 3, since: 101, keep: all, want: []uint64{102, 103}, ok: true},
		{name: "filtered", size: 5, added: 5, since: floor, keep: inA, want: []uint64{101, 103, 105}, ok: true},
		{name: "full, from the floor", size: 3, added: 3, since: floor, keep: all, want: []uint64{101, 102, 103}, ok: true},
		{name: "wrapped, from the last dropped", size: 3, added: 5, since: 102, keep: all, want: []uint64{103, 104, 105}, ok: true},
		{name: "wrapped, from before the last dropped", size: 3, added: 5, since: 101, keep: all},
		{name: "wrapped, from the old floor", size: 3, added: 5, since: floor, keep: all},
		{name: "wrapped twice, filtered", size: 2, added: 7, since: 105, keep: inA, want: []uint64{107}, ok: true},
		{name: "size one", size: 1, added: 4, since: 103, keep: all, want: []uint64{104}, ok: true},
		{name: "size one, too old", size: 1, added: 4, since: 102, keep: all},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHistory(tt.size, 0, floor)
			for i := 1; i <= tt.added; i++ {
				ns := "b"
				if i%2 == 1 {
					ns = "a"
				}
				h.addLocked(&Event{RV: uint64(floor + i), Type: watch.Added, Namespace: ns})
			}
			if want := min(tt.added, tt.size); h.lenLocked() != want {
				t.Errorf("holds %d events, want %d", h.lenLocked(), want)
			}
			events, ok := h.sinceLocked(tt.since, "", tt.keep)
			var got []uint64
			for _, e := range events {
				got = append(got, e.RV)
			}
			if ok != tt.ok || !slices.Equal(got, tt.want) {
				t.Errorf("since(%d) = %v, %v; want %v, %v", tt.since, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// bigObject is an unstructured object of about n bytes of content.
func bigObject(name string, n int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "policy.example.com/v1", "kind": "Guardrail",
		"metadata": map[string]any{"name": name, "namespace": global},
		"spec":     map[string]any{"blob": strings.Repeat("x", n)},
	}}
}

// TestHistoryBytes: the history is bounded by the estimated bytes of what
// its events pin, each shared object charged once; events are dropped
// oldest first and the floor follows, so a resume from a dropped version
// answers Gone. With the count bound alone, 100,000 events of large
// Overlay objects (one merged object per namespace) pinned gigabytes.
func TestHistoryBytes(t *testing.T) {
	t.Parallel()
	const floor, mib = 100, 1 << 20
	shared := bigObject("shared", mib)
	tests := []struct {
		name string
		// objects returns the event's source object and merged object (nil
		// for none), i counting from 1.
		objects  func(i int) (source, merged any)
		events   int
		maxBytes int64
		// wantHeld events are kept (the newest ones).
		wantHeld int
	}{
		{
			name:    "a merged object of 1 MiB per event",
			objects: func(i int) (any, any) { return shared, bigObject(fmt.Sprint(i), mib) },
			events:  100, maxBytes: 10*mib + 10*64<<10, wantHeld: 9,
		},
		{
			// Charged per event, 100 events would be 100 MiB.
			name:    "one shared source object of 1 MiB, charged once",
			objects: func(int) (any, any) { return shared, nil },
			events:  1000, maxBytes: 2 * mib, wantHeld: 100,
		},
		{
			name:    "small objects, the count binds",
			objects: func(i int) (any, any) { return bigObject(fmt.Sprint(i), 10), nil },
			events:  300, maxBytes: DefaultHistoryBytes, wantHeld: 100,
		},
		{
			name:    "one event over the bound",
			objects: func(i int) (any, any) { return bigObject(fmt.Sprint(i), 2*mib), nil },
			events:  3, maxBytes: mib, wantHeld: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHistory(100, tt.maxBytes, floor)
			for i := 1; i <= tt.events; i++ {
				source, merged := tt.objects(i)
				h.addLocked(&Event{RV: uint64(floor + i), Type: watch.Modified, Resource: "guardrails", Namespace: fmt.Sprint("team-", i), Name: "g",
					Result: merge.Result{Item: merge.Item{Namespace: global, Name: "g", Object: source}, Scope: merge.ScopeGlobal, Object: merged}})
				if h.bytesLocked() > tt.maxBytes {
					t.Fatalf("after event %d: %d bytes held, over the bound of %d", i, h.bytesLocked(), tt.maxBytes)
				}
			}
			if h.lenLocked() != tt.wantHeld {
				t.Errorf("holds %d events, want %d", h.lenLocked(), tt.wantHeld)
			}
			last := uint64(floor + tt.events)
			oldestKept := last - uint64(tt.wantHeld) // resuming from here gets every kept event
			if events, ok := h.sinceLocked(oldestKept, "", func(*Event) bool { return true }); !ok || len(events) != tt.wantHeld {
				t.Errorf("since(%d) = %d events, %v; want %d, true", oldestKept, len(events), ok, tt.wantHeld)
			}
			if tt.wantHeld < tt.events {
				if _, ok := h.sinceLocked(oldestKept-1, "", func(*Event) bool { return true }); ok {
					t.Errorf("since(%d) succeeded, but event %d was dropped", oldestKept-1, oldestKept)
				}
			}
		})
	}
}

// TestHistoryBytesAccounting: dropping every event releases every byte and
// every object reference it charged.
func TestHistoryBytesAccounting(t *testing.T) {
	t.Parallel()
	shared := bigObject("shared", 1000)
	h := newHistory(4, 0, 0)
	for i := 1; i <= 4; i++ {
		old := merge.Result{Item: merge.Item{Name: "a", Object: shared}, Conflicts: []string{"blocked"}}
		h.addLocked(&Event{RV: uint64(i), Type: watch.Modified, Name: "a", Old: &old,
			Result: merge.Result{Item: merge.Item{Name: "a", Object: shared}, Object: bigObject("merged", 500),
				Overlays: []merge.Item{{Name: "a", Object: bigObject("overlay", 100)}, {Name: "b", Object: new(int)}}}})
	}
	if len(h.objects) != 1+4*3 {
		t.Errorf("%d objects referenced, want %d", len(h.objects), 1+4*3)
	}
	// Four events of small objects push out the four above.
	for i := 5; i <= 8; i++ {
		h.addLocked(&Event{RV: uint64(i), Type: watch.Added, Name: "b"})
	}
	if want := 4 * (eventOverhead + int64(len("b"))); h.bytesLocked() != want {
		t.Errorf("%d bytes held, want %d", h.bytesLocked(), want)
	}
	if len(h.objects) != 0 {
		t.Errorf("%d objects still referenced, want none", len(h.objects))
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	objA, objA2, objB := new(int), new(int), new(int)
	res := func(name string, obj any, scope merge.Scope, from string, conflicts ...string) merge.Result {
		return merge.Result{Item: merge.Item{Namespace: from, Name: name, Object: obj}, Scope: scope, Conflicts: conflicts}
	}
	type ev struct {
		typ  watch.EventType
		name string
		obj  any
		old  any // the Old result's object, MODIFIED only
	}
	tests := []struct {
		name          string
		before, after []merge.Result
		want          []ev
	}{
		{name: "nothing"},
		{name: "unchanged", before: []merge.Result{res("a", objA, merge.ScopeGlobal, global)}, after: []merge.Result{res("a", objA, merge.ScopeGlobal, global)}},
		{name: "added", after: []merge.Result{res("a", objA, merge.ScopeGlobal, global)}, want: []ev{{watch.Added, "a", objA, nil}}},
		{name: "deleted", before: []merge.Result{res("a", objA, merge.ScopeGlobal, global)}, want: []ev{{watch.Deleted, "a", objA, nil}}},
		{
			name:   "new source object",
			before: []merge.Result{res("a", objA, merge.ScopeGlobal, global)},
			after:  []merge.Result{res("a", objA2, merge.ScopeGlobal, global)},
			want:   []ev{{watch.Modified, "a", objA2, objA}},
		},
		{
			name:   "same object, other scope",
			before: []merge.Result{res("a", objA, merge.ScopeParent, "org")},
			after:  []merge.Result{res("a", objA, merge.ScopeLocal, "org")},
			want:   []ev{{watch.Modified, "a", objA, objA}},
		},
		{
			name:   "same object, other source namespace",
			before: []merge.Result{res("a", objA, merge.ScopeParent, "org")},
			after:  []merge.Result{res("a", objA, merge.ScopeParent, "team")},
			want:   []ev{{watch.Modified, "a", objA, objA}},
		},
		{
			name:   "conflict appears",
			before: []merge.Result{res("a", objA, merge.ScopeGlobal, global)},
			after:  []merge.Result{res("a", objA, merge.ScopeGlobal, global, "shadow blocked")},
			want:   []ev{{watch.Modified, "a", objA, objA}},
		},
		{
			name:   "conflict changes",
			before: []merge.Result{res("a", objA, merge.ScopeGlobal, global, "shadow blocked")},
			after:  []merge.Result{res("a", objA, merge.ScopeGlobal, global, "exclusion blocked")},
			want:   []ev{{watch.Modified, "a", objA, objA}},
		},
		{
			name:   "same conflicts",
			before: []merge.Result{res("a", objA, merge.ScopeGlobal, global, "x", "y")},
			after:  []merge.Result{res("a", objA, merge.ScopeGlobal, global, "x", "y")},
		},
		{
			name:   "interleaved",
			before: []merge.Result{res("a", objA, merge.ScopeGlobal, global), res("c", objA, merge.ScopeGlobal, global), res("d", objB, merge.ScopeLocal, "x"), res("f", objB, merge.ScopeLocal, "x")},
			after:  []merge.Result{res("b", objB, merge.ScopeGlobal, global), res("c", objA, merge.ScopeGlobal, global), res("d", objA2, merge.ScopeLocal, "x"), res("e", objA, merge.ScopeLocal, "x")},
			want: []ev{
				{watch.Deleted, "a", objA, nil},
				{watch.Added, "b", objB, nil},
				{watch.Modified, "d", objA2, objB},
				{watch.Added, "e", objA, nil},
				{watch.Deleted, "f", objB, nil},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := diff("rolebindings", "team", tt.before, tt.after)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d events, want %d: %+v", len(got), len(tt.want), got)
			}
			for i, e := range got {
				w := tt.want[i]
				if e.Type != w.typ || e.Name != w.name || e.Result.Item.Object != w.obj || e.Resource != "rolebindings" || e.Namespace != "team" || e.RV != 0 {
					t.Errorf("event %d = %s %s/%s %s rv %d; want %s team/%s", i, e.Type, e.Namespace, e.Name, e.Resource, e.RV, w.typ, w.name)
				}
				switch {
				case w.old == nil && e.Old != nil:
					t.Errorf("event %d: Old set on a %s", i, e.Type)
				case w.old != nil && (e.Old == nil || e.Old.Item.Object != w.old):
					t.Errorf("event %d: Old = %+v, want the result of %p", i, e.Old, w.old)
				}
			}
		})
	}
}

const global = "implicit-global"
