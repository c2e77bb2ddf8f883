package merge_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

func TestExplain(t *testing.T) {
	t.Parallel()
	global := func(items ...merge.Item) merge.Level { return level(merge.ScopeGlobal, globalNS, nil, items...) }
	org := func(ex []merge.Exclusion, items ...merge.Item) merge.Level {
		return level(merge.ScopeParent, "org", ex, items...)
	}
	team := func(ex []merge.Exclusion, items ...merge.Item) merge.Level {
		return level(merge.ScopeLocal, "team", ex, items...)
	}
	overlays := merge.Options{Overlayer: fakeOverlayer{}}
	type lv struct {
		outcome merge.Outcome
		by      string
		effects []merge.ExclusionEffect
	}
	for _, tc := range []struct {
		name   string
		levels []merge.Level
		opts   merge.Options
		want   []lv
		// winner is the namespace of the view's item, "" when not in the view.
		winner string
	}{
		{
			name:   "nearest wins: the local item shadows the parent's, which shadowed the global one",
			levels: []merge.Level{global(item(globalNS, "a")), org(nil, item("org", "a")), team(nil, item("team", "a"))},
			want:   []lv{{outcome: merge.Shadowed, by: "org"}, {outcome: merge.Shadowed, by: "team"}, {outcome: merge.Won}},
			winner: "team",
		},
		{
			name:   "a lock blocks the parent's and the local shadow",
			levels: []merge.Level{global(locked(globalNS, "a")), org(nil, item("org", "a")), team(nil, item("team", "a"))},
			want:   []lv{{outcome: merge.Won}, {outcome: merge.BlockedByLock, by: globalNS}, {outcome: merge.BlockedByLock, by: globalNS}},
			winner: globalNS,
		},
		{
			name:   "an exclusion in the parent removes the global item for the child too",
			levels: []merge.Level{global(item(globalNS, "a")), org(excl("rolebindings/a")), team(nil)},
			want: []lv{{outcome: merge.Excluded, by: "org"}, {outcome: merge.NoItem, effects: []merge.ExclusionEffect{merge.ExclusionRemoved}},
				{outcome: merge.NoItem}},
		},
		{
			name:   "an exclusion of a locked item is blocked; an exclusion of another resource does not match",
			levels: []merge.Level{global(locked(globalNS, "a")), org(nil), team(excl("roles/a", "rolebindings/*"))},
			want: []lv{{outcome: merge.Won}, {outcome: merge.NoItem},
				{outcome: merge.NoItem, effects: []merge.ExclusionEffect{merge.ExclusionBlocked}}},
			winner: globalNS,
		},
		{
			name:   "an exclusion with nothing inherited is idle; the local item stays",
			levels: []merge.Level{global(), org(nil), team(excl("rolebindings/a"), item("team", "a"))},
			want:   []lv{{outcome: merge.NoItem}, {outcome: merge.NoItem}, {outcome: merge.Won, effects: []merge.ExclusionEffect{merge.ExclusionIdle}}},
			winner: "team",
		},
		{
			name:   "a local overlay is merged onto the parent's item",
			levels: []merge.Level{global(), org(nil, item("org", "a")), team(nil, overlaying(item("team", "a")))},
			opts:   overlays,
			want:   []lv{{outcome: merge.NoItem}, {outcome: merge.Won}, {outcome: merge.Overlaid, by: "org"}},
			winner: "org",
		},
		{
			name:   "an overlay can't turn a locked item into one it may overlay",
			levels: []merge.Level{global(locked(globalNS, "a")), org(nil), team(nil, overlaying(item("team", "a")))},
			opts:   overlays,
			want:   []lv{{outcome: merge.Won}, {outcome: merge.NoItem}, {outcome: merge.BlockedByLock, by: globalNS}},
			winner: globalNS,
		},
		{
			name: "a local shadow replaces the base and its overlays",
			levels: []merge.Level{global(item(globalNS, "a")), org(nil, overlaying(item("org", "a"))),
				team(nil, item("team", "a"))},
			opts:   overlays,
			want:   []lv{{outcome: merge.Shadowed, by: "team"}, {outcome: merge.Shadowed, by: "team"}, {outcome: merge.Won}},
			winner: "team",
		},
		{
			name:   "a locked overlay blocks the shadow below it",
			levels: []merge.Level{global(item(globalNS, "a")), org(nil, overlaying(locked("org", "a"))), team(nil, item("team", "a"))},
			opts:   overlays,
			want:   []lv{{outcome: merge.Won}, {outcome: merge.Overlaid, by: globalNS}, {outcome: merge.BlockedByLock, by: "org"}},
			winner: globalNS,
		},
		{
			name:   "a name in no scope",
			levels: []merge.Level{global(item(globalNS, "b")), org(nil), team(nil)},
			want:   []lv{{outcome: merge.NoItem}, {outcome: merge.NoItem}, {outcome: merge.NoItem}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := merge.Explain(resource, "a", tc.levels, tc.opts)
			if len(e.Levels) != len(tc.want) {
				t.Fatalf("%d levels, want %d", len(e.Levels), len(tc.want))
			}
			for i, w := range tc.want {
				got := e.Levels[i]
				var effects []merge.ExclusionEffect
				for _, s := range got.Exclusions {
					effects = append(effects, s.Effect)
				}
				if got.Outcome != w.outcome || got.By != w.by || !reflect.DeepEqual(effects, w.effects) {
					t.Errorf("level %d (%s): %s by %q, exclusions %v; want %s by %q, exclusions %v",
						i, got.Namespace, got.Outcome, got.By, effects, w.outcome, w.by, w.effects)
				}
				if got.Message() == "" {
					t.Errorf("level %d: no message", i)
				}
			}
			switch {
			case tc.winner == "" && e.Result != nil:
				t.Errorf("result %+v, want none", e.Result.Item)
			case tc.winner != "" && (e.Result == nil || e.Result.Item.Namespace != tc.winner):
				t.Errorf("result %+v, want the item of %s", e.Result, tc.winner)
			}
		})
	}
}

// FuzzExplain checks that an explanation can't disagree with the view: for
// any levels, each name's trace ends where MergeWith does (same base, same
// overlays, in order), and its Result is MergeWith's.
func FuzzExplain(f *testing.F) {
	for _, seed := range [][]byte{
		{},
		{1, 2, 0, 2, 0, 1, 0},
		{2, 1, 0, 1, 0x00, 1, 1, 1, 0x00, 1, 0},
		{4, 3, 0, 2, 4, 0, 1, 4, 2, 0x01, 0x00, 0, 2, 0x01, 0x03, 1, 1, 2, 0x00, 0x02, 0},
		{3, 2, 1, 6, 0, 1, 0, 1, 0x10, 1, 2, 1, 0x02, 1, 4, 0xff},
	} {
		f.Add(seed, uint8(0), uint8(0))
		f.Add(seed, uint8(1), uint8(0x5a))
		f.Add(seed, uint8(2), uint8(0xa5))
	}
	f.Fuzz(func(t *testing.T, data []byte, mode, overlayBits uint8) {
		levels := fuzzLevels(data)
		// One item of a name per namespace, as sources are; some ask for overlays.
		bit := 0
		for i := range levels {
			seen := map[string]bool{}
			var kept []merge.Item
			for _, it := range levels[i].Items {
				if seen[it.Name] {
					continue
				}
				seen[it.Name] = true
				it.Overlay = overlayBits&(1<<(bit%8)) != 0
				bit++
				kept = append(kept, it)
			}
			levels[i].Items = kept
		}
		var o merge.Options
		switch mode % 3 {
		case 1:
			o.Overlayer = fakeOverlayer{}
		case 2:
			o = merge.Options{Strategy: merge.Overlay, Overlayer: fakeOverlayer{}}
		}
		view := map[string]merge.Result{}
		for _, r := range merge.MergeWith(resource, levels, o) {
			view[r.Item.Name] = r
		}
		for _, name := range fuzzNames {
			e := merge.Explain(resource, name, levels, o)
			want, inView := view[name]
			w := e.Winner()
			if (w >= 0) != inView || (e.Result != nil) != inView {
				t.Fatalf("%s: trace winner %d, result %v; in the view: %v; levels %+v", name, w, e.Result != nil, inView, levels)
			}
			if !inView {
				continue
			}
			if got := *e.Levels[w].Item; got != want.Item {
				t.Fatalf("%s: trace winner %+v, view %+v", name, got, want.Item)
			}
			var traced []merge.Item
			for _, l := range e.Levels {
				if l.Outcome == merge.Overlaid {
					traced = append(traced, *l.Item)
				}
			}
			if !reflect.DeepEqual(traced, want.Overlays) {
				t.Fatalf("%s: traced overlays %+v, view %+v", name, traced, want.Overlays)
			}
			if !reflect.DeepEqual(*e.Result, want) {
				t.Fatalf("%s: result %+v, view %+v", name, *e.Result, want)
			}
			for _, l := range e.Levels {
				if (l.Item == nil) != (l.Outcome == merge.NoItem) {
					t.Fatalf("%s: level %s: item %v with outcome %s", name, l.Namespace, l.Item, l.Outcome)
				}
			}
		}
	})
}

func ExampleExplain() {
	levels := []merge.Level{
		{Scope: merge.ScopeGlobal, Namespace: "implicit-global", Items: []merge.Item{{Namespace: "implicit-global", Name: "auditors", Locked: true}}},
		{Scope: merge.ScopeLocal, Namespace: "team-a", Items: []merge.Item{{Namespace: "team-a", Name: "auditors"}}},
	}
	for _, l := range merge.Explain("rolebindings", "auditors", levels, merge.Options{}).Levels {
		fmt.Printf("%s %s: %s (%s)\n", l.Scope, l.Namespace, l.Outcome, l.Message())
	}
	// Output:
	// global implicit-global: Won (implicit-global/auditors is the view's item)
	// local team-a: BlockedByLock (could not shadow the item locked in namespace implicit-global)
}
