package testwait_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
)

// recorder is a testing.TB whose Fatalf records the message and ends the
// goroutine, as t.Fatalf does, without failing the test.
type recorder struct {
	*testing.T
	fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with r on a goroutine of its own, as a test would.
func (r *recorder) run(f func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
}

func TestFor(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		testwait.For(t, "a second to pass", func() bool { return time.Since(start) >= time.Second })
		if d := time.Since(start); d < time.Second || d > time.Second+testwait.Interval {
			t.Errorf("For returned after %s, want a second and at most one interval more", d)
		}

		r := &recorder{T: t}
		r.run(func(tb testing.TB) { testwait.For(tb, "never", func() bool { return false }) })
		if !strings.Contains(r.fatal, "waiting for never") || time.Since(start) < testwait.Timeout {
			t.Errorf("For on a condition that never holds: %q after %s", r.fatal, time.Since(start))
		}
	})
}

func TestWithinReportsTheLastError(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		n := 0
		r := &recorder{T: t}
		r.run(func(tb testing.TB) {
			testwait.Within(tb, time.Second, 10*time.Second, "the check", func(context.Context) error {
				n++
				return fmt.Errorf("attempt %d", n)
			})
		})
		if want := fmt.Sprintf("attempt %d", n); n < 10 || !strings.HasSuffix(r.fatal, want) {
			t.Errorf("after %d attempts: %q, want it to end with %q", n, r.fatal, want)
		}
	})
}
