package watchmux

import (
	"math"
	"testing"
)

func TestOurs(t *testing.T) {
	t.Parallel()
	v := versions{instance: 12345}
	for range 10 {
		if _, ok := v.next(); !ok {
			t.Fatal("next: counter exhausted")
		}
	}
	cur := v.current()
	other := versions{instance: 54321, counter: 10}
	tests := []struct {
		name string
		seq  uint64
		want bool
	}{
		{name: "none", seq: 0, want: false},
		{name: "current", seq: cur, want: true},
		{name: "past", seq: cur - 3, want: true},
		{name: "the instance's base, before any event", seq: v.instance << counterBits, want: true},
		{name: "future", seq: cur + 1, want: false},
		{name: "another instance's current", seq: other.current(), want: false},
		{name: "another instance's, numerically below ours", seq: 1<<counterBits | 5, want: false},
		{name: "another instance's, numerically above ours", seq: (instanceMax-1)<<counterBits | 5, want: false},
		{name: "small integer", seq: 12, want: false},
	}
	for _, tt := range tests {
		if got := v.ours(tt.seq); got != tt.want {
			t.Errorf("%s: ours(%d) = %v, want %v", tt.name, tt.seq, got, tt.want)
		}
	}
}

func TestVersions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		v    versions
	}{
		{name: "random instance", v: newVersions()},
		{name: "smallest instance", v: versions{instance: 1}},
		{name: "largest instance", v: versions{instance: instanceMax - 1}},
		{name: "largest instance, counter nearly exhausted", v: versions{instance: instanceMax - 1, counter: counterMask - 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := tt.v
			if v.instance == 0 || v.instance >= instanceMax {
				t.Fatalf("instance %d out of [1, %d)", v.instance, instanceMax)
			}
			prev := v.current()
			for i := 0; i < 2; i++ {
				rv, ok := v.next()
				if !ok {
					t.Fatalf("next %d: exhausted", i)
				}
				if rv != prev+1 || rv != v.current() {
					t.Errorf("next = %d after %d, current %d; want consecutive", rv, prev, v.current())
				}
				prev = rv
				if rv > math.MaxInt64 || !v.ours(rv) {
					t.Errorf("sequence number %d is not its own or not an int64", rv)
				}
			}
		})
	}
}

func TestVersionsExhausted(t *testing.T) {
	t.Parallel()
	v := versions{instance: 7, counter: counterMask - 1}
	if _, ok := v.next(); !ok {
		t.Fatal("the last version of the counter space was refused")
	}
	last := v.current()
	if _, ok := v.next(); ok {
		t.Fatal("next past the counter space succeeded")
	}
	if v.current() != last {
		t.Errorf("current moved from %d to %d after exhaustion", last, v.current())
	}
	if last>>counterBits != 7 {
		t.Errorf("last version %d spilled into the instance bits", last)
	}
}

func TestNewVersionsDistinct(t *testing.T) {
	t.Parallel()
	// Two random instances collide with odds of 1 in 2^22; ten of them all
	// equal never happens.
	seen := map[uint64]bool{}
	for range 10 {
		seen[newVersions().instance] = true
	}
	if len(seen) < 2 {
		t.Errorf("10 instances drew %d distinct ids", len(seen))
	}
}
