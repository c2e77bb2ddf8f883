package invariants

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestInvariants plays random sequences of requests by random actors
// through every guard, as kube-apiserver calls them, and checks the four
// invariants of DESIGN.md ("Guards") after every admitted change:
//
//   - locks: no admitted change by an actor without unlock on a locked
//     source takes its item out of a view where it was, or changes a field
//     it sets there; and a candidate stands in for a locked source only if
//     someone who may unlock it wrote it;
//   - grants: the authorization webhook answers as the inherited bindings
//     would grant as real RBAC objects (oracle_test.go);
//   - materialized: in a tenant namespace, the real object under a locked
//     inherited name is the view's item (its copy);
//   - guard memory: what the guards admit, guards without memory over the
//     same mirror admit too, and once every assumption has expired both
//     decide alike;
//
// and, from issue 24 item 8, that an admitted write to a copy is not
// silently undone.
//
// Each sequence is deterministic per seed. The run plays
// IMPLICIT_INVARIANTS_SEQUENCES sequences (default 40, 10 with -short;
// make fuzz sets more), counted rather than timed so that a slow machine
// explores as much as a fast one, from seed IMPLICIT_INVARIANTS_SEED
// (default 1). With IMPLICIT_INVARIANTS_VETO=P, each request is also
// refused by another webhook with probability P (op.vetoed; 0 by default,
// which keeps every seed's sequence). A broken invariant is shrunk (at most 400 replays) to a
// short sequence and printed with every webhook's verdict. The items still
// open on main would be listed in openItems: their violations are logged,
// not failed, unless IMPLICIT_INVARIANTS_STRICT=1; any other violation
// fails the test. None is open (issue 39 closed the last ones).
func TestInvariants(t *testing.T) {
	total := uint64(40)
	if testing.Short() {
		total = 10
	}
	if v := os.Getenv("IMPLICIT_INVARIANTS_SEQUENCES"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			t.Fatalf("IMPLICIT_INVARIANTS_SEQUENCES=%q: want a positive count", v)
		}
		total = n
	}
	seed := uint64(1)
	if v := os.Getenv("IMPLICIT_INVARIANTS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("IMPLICIT_INVARIANTS_SEED=%q: %v", v, err)
		}
		seed = s
	}
	strict := os.Getenv("IMPLICIT_INVARIANTS_STRICT") == "1"
	var vetoRate float64
	if v := os.Getenv("IMPLICIT_INVARIANTS_VETO"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 || r > 1 {
			t.Fatalf("IMPLICIT_INVARIANTS_VETO=%q: want a probability", v)
		}
		vetoRate = r
	}

	s := newShared(t)
	found := map[string]*finding{}
	sequences, ops, writes, finished, emptied, approvals := 0, 0, 0, 0, 0, 0
	start := time.Now()
	for n := range total {
		sequences++
		rng := rand.New(rand.NewPCG(seed, n))
		h := mustHarness(t, s)
		h.sampleGrants = true
		var played []op
		seen := map[string]bool{}
		for range opsPerSequence {
			o := veto(h.gen(rng), vetoRate)
			played = append(played, o)
			ops++
			if h.run(o) {
				writes++
				switch o.kind {
				case opNSFinish:
					finished++
				case opNSContent:
					emptied++
				}
			}
			// Each kind once per sequence: a broken state stays broken.
			for _, v := range h.violations {
				k := v.kind()
				if seen[k] {
					continue
				}
				seen[k] = true
				if f, ok := found[k]; ok {
					f.count++
				} else {
					found[k] = &finding{v: v, seed: seed, sequence: n, count: 1, ops: append([]op(nil), played...)}
				}
			}
		}
		approvals += h.approvalsSeen
	}
	t.Logf("%d sequences, %d requests (%d stored; %d deletions held in Terminating finished later, %d objects of Terminating namespaces deleted by the namespace controller through the webhooks; an approved exception in effect after %d of them), seed %d, in %s",
		sequences, ops, writes, finished, emptied, approvals, seed, time.Since(start).Round(time.Millisecond))

	kinds := make([]string, 0, len(found))
	for k := range found {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		f := found[k]
		shrunk := shrink(t, s, f.ops, k)
		report := fmt.Sprintf("%s\nfound in %d sequence(s); first in sequence %d of seed %d; shrunk from %d to %d requests:\n%s",
			f.v, f.count, f.sequence, f.seed, len(f.ops), len(shrunk), replay(t, s, shrunk, k))
		if why, open := openItems[f.v.item]; open && !strict {
			t.Logf("KNOWN OPEN (item %s, %s): %s", f.v.item, why, report)
			continue
		}
		t.Errorf("%s", report)
	}
}

// opsPerSequence bounds a sequence: long enough for assumptions and a
// lagging mirror to matter, short enough to shrink quickly.
const opsPerSequence = 40

// openItems are the items still open on main, by the item a violation
// names: their violations are logged, not failed (unless
// IMPLICIT_INVARIANTS_STRICT=1). Empty: every item the model finds fails
// it. Issue 39 closed the last ones (TestReplicaScenarios plays each):
// races between replicas and within the informers' lag (a namespace
// deleted a moment after it became a parent, a plain create a moment before
// a lock of its name), a stage label onto a locked candidate over a
// namespace's own object of a materialized kind, and a lock set above a
// namespace being deleted.
var openItems = map[string]string{}

type finding struct {
	v        violation
	seed     uint64
	sequence uint64
	count    int
	ops      []op
}

func (v violation) kind() string { return v.invariant + " / item " + v.item }

func mustHarness(t *testing.T, s *shared) *harness {
	t.Helper()
	h, err := newHarness(s)
	if err != nil {
		t.Fatalf("building the harness: %v", err)
	}
	return h
}

// reproduces plays ops on a new harness and reports whether a violation of
// kind k happens.
func reproduces(t *testing.T, s *shared, ops []op, k string) bool {
	h := mustHarness(t, s)
	for _, o := range ops {
		h.run(o)
		for _, v := range h.violations {
			if v.kind() == k {
				return true
			}
		}
	}
	return false
}

// shrink leaves ops out, one at a time, while the violation of kind k
// still happens: a minimal-ish sequence, within a bounded number of tries.
func shrink(t *testing.T, s *shared, ops []op, k string) []op {
	cur := append([]op(nil), ops...)
	tries := 0
	more := func() bool { return tries < 400 }
	for changed := true; changed && more(); {
		changed = false
		for i := 0; i < len(cur) && more(); i++ {
			cand := append(append([]op(nil), cur[:i]...), cur[i+1:]...)
			tries++
			if reproduces(t, s, cand, k) {
				cur, changed = cand, true
				i--
			}
		}
	}
	return cur
}

// replay plays ops and prints each with its verdicts, and the violations.
func replay(t *testing.T, s *shared, ops []op, k string) string {
	h := mustHarness(t, s)
	var b strings.Builder
	reported := 0
	for i, o := range ops {
		h.run(o)
		fmt.Fprintf(&b, "  %2d. %s\n", i+1, o)
		for _, line := range h.transcript {
			fmt.Fprintf(&b, "      %s\n", line)
		}
		broken := false
		for _, v := range h.violations[reported:] {
			fmt.Fprintf(&b, "      BROKEN: %s\n", v)
			broken = broken || v.kind() == k
		}
		reported = len(h.violations)
		if broken {
			break
		}
	}
	return b.String()
}

// TestTerminatingParentScenario plays issue 39's attack in the model:
// alice creates f below her namespace a, deletes it (no children: no guard
// asked), held in Terminating by a finalizer, moves c (which inherits p's
// locked rb) below it, and the finalizer is removed. The move must be
// refused (a namespace going away is no place to move a child to), and the
// end of f's deletion take nothing from c unjudged.
func TestTerminatingParentScenario(t *testing.T) {
	s := newShared(t)
	h := mustHarness(t, s)
	ops := []op{
		{actor: "alice", kind: opNSCreate, name: "f", ns: nsEdit{parent: set, parentN: "a"}},
		{actor: "alice", kind: opNSDelete, name: "f", held: true},
		{actor: "alice", kind: opNSUpdate, name: "c", ns: nsEdit{parent: set, parentN: "f"}},
		{actor: "alice", kind: opNSFinish, name: "f"},
	}
	want := []bool{true, true, false, true}
	for i, o := range ops {
		if stored := h.run(o); stored != want[i] {
			t.Errorf("%s: stored %v, want %v; transcript:\n%s", o, stored, want[i], strings.Join(h.transcript, "\n"))
		}
	}
	for _, v := range h.violations {
		t.Errorf("%s", v)
	}
}
