package accessreview

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
)

// released collects the users whose questions the queue let through, in
// order.
type released struct {
	mu    sync.Mutex
	users []string
	errs  []error
}

func (r *released) add(user string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	r.users = append(r.users, user)
}

func (r *released) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.users...)
}

// step advances clk by one token's time once the queue has scheduled its
// next dispatch.
func step(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	testwait.For(t, "the next dispatch to be scheduled", clk.HasWaiters)
	clk.Step(100 * time.Millisecond)
}

// TestFairQueue: at 10 questions a second (burst 1), a flood of questions
// waits, and then another tenant asks once: its question passes within
// two tokens, whatever the flood's size, where a first-come first-served
// limiter would hold it behind the whole flood. The ServiceAccounts of one
// namespace are one tenant, however many of them ask.
func TestFairQueue(t *testing.T) {
	t.Parallel()
	const flood = 10
	tests := []struct {
		name  string
		flood func(i int) authenticationv1.UserInfo
	}{
		{name: "one user", flood: func(int) authenticationv1.UserInfo { return alice }},
		{name: "many ServiceAccounts of one namespace", flood: func(i int) authenticationv1.UserInfo { return sa("mine", fmt.Sprintf("sa-%d", i)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
			q := newFairQueue(clk, 10, 1, 100)
			ctx := context.Background()
			var got released
			var wg sync.WaitGroup
			// The burst's one token goes at once: the rest of the flood waits.
			for i := range flood {
				wg.Go(func() {
					u := tc.flood(i)
					got.add("flood", q.wait(ctx, u))
				})
			}
			testwait.For(t, "the flood to wait", func() bool { return q.waitingCount() == flood-1 })
			wg.Go(func() { got.add("bob", q.wait(ctx, bob)) })
			testwait.For(t, "bob to wait", func() bool { return q.waitingCount() == flood })
			for tokens := 1; ; tokens++ {
				step(t, clk)
				testwait.For(t, "a question released", func() bool { return len(got.snapshot()) == 1+tokens })
				if got.snapshot()[tokens] == "bob" {
					if tokens > 2 {
						t.Errorf("bob's question passed with token %d after the flood's first, want at most 2 (order %v)", tokens, got.snapshot())
					}
					break
				}
				if tokens == flood {
					t.Fatalf("bob's question never passed: %v", got.snapshot())
				}
			}
			// The rest of the flood passes too, one token each.
			for q.waitingCount() > 0 {
				n := len(got.snapshot())
				step(t, clk)
				testwait.For(t, "the flood to go on", func() bool { return len(got.snapshot()) == n+1 })
			}
			wg.Wait()
			if len(got.errs) > 0 || len(got.users) != flood+1 {
				t.Errorf("released %v, errors %v; want all %d", got.users, got.errs, flood+1)
			}
		})
	}
}

// TestFairQueueUsersOfATenant: within one tenant, its users take turns.
func TestFairQueueUsersOfATenant(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := newFairQueue(clk, 10, 1, 100)
	ctx := context.Background()
	var got released
	var wg sync.WaitGroup
	flooder, other := sa("mine", "flooder"), sa("mine", "ci")
	wg.Go(func() { got.add("first", q.wait(ctx, flooder)) })
	testwait.For(t, "the first token taken", func() bool { return len(got.snapshot()) == 1 })
	for range 5 {
		wg.Go(func() { got.add("flooder", q.wait(ctx, flooder)) })
	}
	testwait.For(t, "the flood to wait", func() bool { return q.waitingCount() == 5 })
	wg.Go(func() { got.add("ci", q.wait(ctx, other)) })
	testwait.For(t, "ci to wait", func() bool { return q.waitingCount() == 6 })
	for i := 1; i <= 2; i++ {
		step(t, clk)
		testwait.For(t, "a question released", func() bool { return len(got.snapshot()) == 1+i })
	}
	if s := got.snapshot(); s[1] != "ci" && s[2] != "ci" {
		t.Errorf("order %v: ci's question should pass within two tokens", s)
	}
	for q.waitingCount() > 0 {
		n := q.waitingCount()
		step(t, clk)
		testwait.For(t, "the flood to go on", func() bool { return q.waitingCount() < n })
	}
	wg.Wait()
}

// TestFairQueueBounds: a question that gives up leaves its place without
// taking a token, and a tenant with MaxWaiting questions waiting is refused
// more while the others still wait their turn.
func TestFairQueueBounds(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	q := newFairQueue(clk, 10, 1, 2)
	ctx := context.Background()
	if err := q.wait(ctx, alice); err != nil {
		t.Fatal(err) // the burst's token
	}
	gaveUp, cancel := context.WithCancel(ctx)
	var got released
	var wg sync.WaitGroup
	wg.Go(func() { got.add("quitter", q.wait(gaveUp, alice)) })
	wg.Go(func() { got.add("alice", q.wait(ctx, alice)) })
	testwait.For(t, "two of alice's to wait", func() bool { return q.waitingCount() == 2 })
	if err := q.wait(ctx, alice); !errors.Is(err, ErrTooManyWaiting) {
		t.Errorf("alice's third waiting question: %v, want ErrTooManyWaiting", err)
	}
	wg.Go(func() { got.add("bob", q.wait(ctx, bob)) })
	testwait.For(t, "bob to wait", func() bool { return q.waitingCount() == 3 })
	cancel()
	testwait.For(t, "the quitter to leave", func() bool { return q.waitingCount() == 2 })
	step(t, clk)
	testwait.For(t, "one released", func() bool { return len(got.snapshot()) == 1 })
	step(t, clk)
	wg.Wait()
	if s := got.snapshot(); len(s) != 2 || len(got.errs) != 1 || !errors.Is(got.errs[0], context.Canceled) {
		t.Errorf("released %v with errors %v, want alice and bob, and the quitter cancelled", s, got.errs)
	}
}
