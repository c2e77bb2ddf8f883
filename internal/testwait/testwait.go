package testwait

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	// Interval is how often For polls: short, because what the unit tests
	// wait for (a goroutine reaching a point) takes microseconds.
	Interval = time.Millisecond
	// Timeout is how long For waits before it fails the test, as
	// wait.ForeverTestTimeout.
	Timeout = 30 * time.Second
)

// For polls cond every Interval until it holds, failing t after Timeout.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, Interval, Timeout, what, func(context.Context) error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// Within polls check every interval until it returns nil, failing t after
// timeout (or when t's context ends) with check's last error.
func Within(t testing.TB, interval, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	last := errNotYet
	err := wait.PollUntilContextTimeout(t.Context(), interval, timeout, true, func(ctx context.Context) (bool, error) {
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, last)
	}
}

var errNotYet = errors.New("the condition does not hold yet")
