package watchmux

import (
	"slices"
	"testing"

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
			h := newHistory(tt.size, floor)
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
			events, ok := h.sinceLocked(tt.since, tt.keep)
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
