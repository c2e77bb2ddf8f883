package invariants

import (
	"fmt"
	"strings"
	"testing"
)

// TestStageScenarios plays two stage labels on one namespace, set one after
// the other in either order of their values, through two replicas whose
// mirrors lag behind both, with the decisions that read the namespace's
// stage made a moment later on either replica: a locked candidate of a
// materialized kind (NetworkPolicy np-next for allow, locked, in the
// global namespace) stands in, in c's view, under the name allow where the
// stage matches its selector. Whichever replica decides and whatever its
// mirror shows, no invariant may break: c's own object under allow while
// the locked candidate stands in there is refused, before or after the
// labels.
//
// Both broke before: an assumed stage never brought a candidate in
// (InheritedAssuming merged the stable sources only), so even one label
// within the mirror's lag let c's copy of allow be made its own; and the
// second of two labels was forgotten as soon as it was assumed (the
// mirror, still showing c before the first, showed neither version the
// second replaced, which read as superseded).
func TestStageScenarios(t *testing.T) {
	s := newShared(t)
	// lagging sends an op to replica to-1, both mirrors seeing it lag ops
	// later.
	lagging := func(o op, to, lag int) op { o.lag, o.lag2, o.to = lag, lag, to; return o }
	candidate := func(selector string) op {
		return op{actor: "org", kind: opCreate, resource: netpols, namespace: global, name: "np-next",
			src: srcEdit{content: 2, lock: set, candidate: set, candFor: "allow", selector: selector}}
	}
	stage := func(v string) op {
		return op{actor: "ops", kind: opNSUpdate, name: "c", ns: nsEdit{stage: set, stageV: v}}
	}
	// makeOwn is alice making c's copy of allow her own.
	makeOwn := op{actor: "alice", kind: opCopyWrite, resource: netpols, namespace: "c", name: "allow", src: srcEdit{content: 0, dropCopyLabel: true}}
	type scenario struct {
		name string
		ops  []op
		want []bool
	}
	var scenarios []scenario
	// One label alone, for comparison: the assumption it leaves stands
	// until the mirrors show it.
	for _, to := range []int{1, 2} {
		scenarios = append(scenarios, scenario{
			name: fmt.Sprintf("stage canary alone (replica %d), then c's own allow on replica %d", to-1, 3-to-1),
			ops: []op{
				candidate("implicit.dev/stage=canary"),
				lagging(stage("canary"), to, 6),
				lagging(makeOwn, 3-to, 0),
			},
			want: []bool{true, true, false},
		})
	}
	// The two labels, in both orders: the last one brings the locked
	// candidate in (its selector matches it), the first one does not.
	for _, order := range [][2]string{{"canary", "x"}, {"x", "canary"}} {
		first, last := order[0], order[1]
		sel := "implicit.dev/stage=" + last
		for _, to := range [][2]int{{1, 1}, {1, 2}, {2, 1}} {
			for _, after := range []int{1, 2} {
				// The labels land first; c's own object comes after,
				// on a replica whose mirror shows neither label.
				scenarios = append(scenarios, scenario{
					name: fmt.Sprintf("stage %s then %s (replicas %d, %d), then c's own allow on replica %d", first, last, to[0]-1, to[1]-1, after-1),
					ops: []op{
						candidate(sel),
						lagging(stage(first), to[0], 6),
						lagging(stage(last), to[1], 6),
						lagging(makeOwn, after, 0),
					},
					want: []bool{true, true, true, false},
				})
				// c's own object first (no label matches yet), then
				// the labels: the last one is refused.
				scenarios = append(scenarios, scenario{
					name: fmt.Sprintf("c's own allow on replica %d, then stage %s then %s (replicas %d, %d)", after-1, first, last, to[0]-1, to[1]-1),
					ops: []op{
						candidate(sel),
						lagging(makeOwn, after, 6),
						lagging(stage(first), to[0], 6),
						lagging(stage(last), to[1], 6),
					},
					want: []bool{true, true, true, false},
				})
			}
		}
	}
	for _, tc := range scenarios {
		t.Run(tc.name, func(t *testing.T) {
			h := mustHarness(t, s)
			for i, o := range tc.ops {
				if o.order == 0 {
					o.order = uint64(i + 1)
				}
				if stored := h.run(o); stored != tc.want[i] {
					t.Errorf("%s: stored %v, want %v; transcript:\n%s", o, stored, tc.want[i], strings.Join(h.transcript, "\n"))
				}
			}
			for _, v := range h.violations {
				t.Errorf("%s", v)
			}
		})
	}
}
