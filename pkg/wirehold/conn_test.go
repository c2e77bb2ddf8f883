package wirehold_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/wirehold"
)

// recorder is a net.Conn that keeps every write call.
type recorder struct {
	net.Conn // nil: only Write and Close are called
	mu       sync.Mutex
	writes   [][]byte
	fail     error
	closed   bool
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return 0, r.fail
	}
	r.writes = append(r.writes, bytes.Clone(p))
	return len(p), nil
}

func (r *recorder) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	return nil
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.writes)
}

func (r *recorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Join(r.writes, nil)
}

func TestConnHoldsUntilLastRelease(t *testing.T) {
	tests := []struct {
		name   string
		holds  int
		writes []string
		// wantCalls: write calls once every hold is released.
		wantCalls int
	}{
		{name: "no hold writes each", holds: 0, writes: []string{"a", "b", "c"}, wantCalls: 3},
		{name: "one hold, one call", holds: 1, writes: []string{"a", "b", "c"}, wantCalls: 1},
		{name: "three holds, one call", holds: 3, writes: []string{"a", "bb", "ccc", "dddd"}, wantCalls: 1},
		{name: "held but nothing written", holds: 2, writes: nil, wantCalls: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			clk := clocktesting.NewFakeClock(time.Now())
			c := wirehold.NewConn(rec, clk, time.Millisecond, nil)
			for range tt.holds {
				c.Hold()
			}
			want := ""
			for _, w := range tt.writes {
				if n, err := c.Write([]byte(w)); err != nil || n != len(w) {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
				want += w
			}
			if tt.holds > 0 && rec.calls() != 0 {
				t.Fatalf("%d write calls while held, want 0", rec.calls())
			}
			for i := range tt.holds {
				c.Release(1)
				if i < tt.holds-1 && rec.calls() != 0 {
					t.Fatalf("written with %d holds left", tt.holds-1-i)
				}
			}
			if got := rec.calls(); got != tt.wantCalls {
				t.Errorf("write calls = %d, want %d", got, tt.wantCalls)
			}
			if got := string(rec.bytes()); got != want {
				t.Errorf("written %q, want %q", got, want)
			}
		})
	}
}

func TestConnMaxHoldBoundsAStuckHold(t *testing.T) {
	rec := &recorder{}
	clk := clocktesting.NewFakeClock(time.Now())
	c := wirehold.NewConn(rec, clk, 2*time.Millisecond, nil)
	c.Hold() // never released
	_, _ = c.Write([]byte("event-1"))
	clk.Step(time.Millisecond)
	if rec.calls() != 0 {
		t.Fatalf("written before maxHold")
	}
	clk.Step(time.Millisecond)
	waitFor(t, func() bool { return rec.calls() == 1 })
	if got := string(rec.bytes()); got != "event-1" {
		t.Fatalf("written %q", got)
	}
	// Later bytes are held again, each at most maxHold.
	_, _ = c.Write([]byte("event-2"))
	clk.Step(2 * time.Millisecond)
	waitFor(t, func() bool { return rec.calls() == 2 })
	if got, want := string(rec.bytes()), "event-1event-2"; got != want {
		t.Fatalf("written %q, want %q", got, want)
	}
	if c.Expired() != 2 {
		t.Errorf("Expired() = %d, want 2", c.Expired())
	}
}

func TestConnOverflowWritesInOrder(t *testing.T) {
	rec := &recorder{}
	c := wirehold.NewConn(rec, clocktesting.NewFakeClock(time.Now()), time.Millisecond, nil)
	c.Hold()
	var want []byte
	for i := range 40 {
		p := bytes.Repeat([]byte{byte('a' + i%26)}, 4<<10)
		want = append(want, p...)
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	if rec.calls() == 0 {
		t.Fatalf("160 KiB held: want writes past the bound")
	}
	c.Release(1)
	if !bytes.Equal(rec.bytes(), want) {
		t.Fatalf("bytes differ from what was written")
	}
}

func TestConnWriteErrorIsReturnedAndCloses(t *testing.T) {
	rec := &recorder{}
	c := wirehold.NewConn(rec, clocktesting.NewFakeClock(time.Now()), time.Millisecond, nil)
	c.Hold()
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	broken := errors.New("broken pipe")
	rec.mu.Lock()
	rec.fail = broken
	rec.mu.Unlock()
	c.Release(1)
	if _, err := c.Write([]byte("next")); !errors.Is(err, broken) {
		t.Fatalf("Write after a failed held write: %v, want %v", err, broken)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !rec.closed {
		t.Fatalf("connection not closed after losing held bytes")
	}
}

func TestConnCloseWritesHeld(t *testing.T) {
	rec := &recorder{}
	closed := 0
	c := wirehold.NewConn(rec, clocktesting.NewFakeClock(time.Now()), time.Millisecond, func() { closed++ })
	c.Hold()
	_, _ = c.Write([]byte("goaway"))
	_ = c.Close()
	_ = c.Close()
	if got := string(rec.bytes()); got != "goaway" {
		t.Fatalf("written %q on close", got)
	}
	if closed != 1 {
		t.Fatalf("onClose ran %d times", closed)
	}
}

// Writers on many goroutines (the serve loop's, as handlers flush) and
// holders releasing concurrently: every byte is written once, each
// writer's in its order.
func TestConnConcurrentHoldsAndWrites(t *testing.T) {
	rec := &recorder{}
	c := wirehold.NewConn(rec, clocktesting.NewFakeClock(time.Now()), time.Millisecond, nil)
	const streams, events = 20, 200
	var writeMu sync.Mutex // one writer at a time, as tls.Conn writes
	var wg sync.WaitGroup
	for s := range streams {
		wg.Go(func() {
			for e := range events {
				c.Hold()
				writeMu.Lock()
				_, err := fmt.Fprintf(c, "s%02d-e%03d;", s, e)
				writeMu.Unlock()
				if err != nil {
					t.Error(err)
				}
				if e%2 == 0 {
					c.Release(1)
				} else {
					c.ReleaseLater(1)
				}
			}
		})
	}
	wg.Wait()
	waitFor(t, func() bool { return len(rec.bytes()) == streams*events*len("s00-e000;") })
	next := make([]int, streams)
	for _, rec := range bytes.Split(bytes.TrimSuffix(rec.bytes(), []byte(";")), []byte(";")) {
		var s, e int
		if _, err := fmt.Sscanf(string(rec), "s%02d-e%03d", &s, &e); err != nil {
			t.Fatalf("garbled record %q: %v", rec, err)
		}
		if e != next[s] {
			t.Fatalf("stream %d: event %d after %d", s, e, next[s]-1)
		}
		next[s]++
	}
	t.Logf("%d events in %d write calls", streams*events, rec.calls())
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testwait.For(t, "the held bytes written", cond)
}
