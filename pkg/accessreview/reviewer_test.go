package accessreview

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestBudget: the questions asked with one admission review's budget are
// capped, cached answers included (so the cap does not depend on what the
// cache holds); another review has a budget of its own, and questions
// asked without one are not counted.
func TestBudget(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	host := &fakeHost{}
	r := New(host, Options{Clock: clk, PerAdmission: 3})
	ask := func(ctx context.Context, name string) error {
		_, _, err := r.Allowed(ctx, alice, unlock(name))
		return err
	}
	review := r.Budget(context.Background())
	for _, name := range []string{"a", "b", "a"} {
		if err := ask(review, name); err != nil {
			t.Fatalf("question %s within the cap: %v", name, err)
		}
	}
	if err := ask(review, "c"); !errors.Is(err, ErrTooManyReviews) {
		t.Errorf("the fourth question: %v, want ErrTooManyReviews", err)
	}
	if err := ask(review, "a"); !errors.Is(err, ErrTooManyReviews) {
		t.Errorf("a fifth, cached question: %v, want ErrTooManyReviews", err)
	}
	if n := host.count(); n != 3 {
		t.Errorf("the host was asked %d times, want 3 (a, b and a again: a denial is never cached; the rest refused)", n)
	}
	next := r.Budget(context.Background())
	for _, name := range []string{"c", "d", "e"} {
		if err := ask(next, name); err != nil {
			t.Errorf("question %s of another review: %v", name, err)
		}
	}
	for _, name := range []string{"f", "g", "h", "i"} {
		if err := ask(context.Background(), name); err != nil {
			t.Errorf("question %s without a budget: %v", name, err)
		}
	}
}
