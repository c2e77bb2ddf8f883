package watchmux

import (
	"math"
	"strconv"
	"testing"
)

func TestClassify(t *testing.T) {
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
		name  string
		rv    string
		state rvState
		n     uint64
	}{
		{name: "empty: any", rv: "", state: rvAny},
		{name: "zero: any", rv: "0", state: rvAny},
		{name: "current", rv: format(cur), state: rvOurs, n: cur},
		{name: "past", rv: format(cur - 3), state: rvOurs, n: cur - 3},
		{name: "the instance's base, before any event", rv: format(v.instance << counterBits), state: rvOurs, n: v.instance << counterBits},
		{name: "future", rv: format(cur + 1), state: rvFuture, n: cur + 1},
		{name: "another instance's current", rv: format(other.current()), state: rvForeign},
		{name: "another instance's, numerically below ours", rv: format(1<<counterBits | 5), state: rvForeign},
		{name: "another instance's, numerically above ours", rv: format((instanceMax-1)<<counterBits | 5), state: rvForeign},
		{name: "small integer, as from etcd", rv: "12", state: rvForeign},
		{name: "leading zeros of zero", rv: "00", state: rvForeign},
		{name: "negative", rv: "-1", state: rvForeign},
		{name: "plus sign", rv: "+" + format(cur), state: rvForeign},
		{name: "garbage", rv: "abc", state: rvForeign},
		{name: "hex", rv: "0x" + strconv.FormatUint(cur, 16), state: rvForeign},
		{name: "overflows uint64", rv: "184467440737095516160", state: rvForeign},
		{name: "blank", rv: " ", state: rvForeign},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			state, n := v.classify(tt.rv)
			if state != tt.state || n != tt.n {
				t.Errorf("classify(%q) = %v, %d; want %v, %d", tt.rv, state, n, tt.state, tt.n)
			}
		})
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
				s := format(rv)
				n, err := strconv.ParseInt(s, 10, 64)
				if err != nil || uint64(n) != rv || rv > math.MaxInt64 {
					t.Errorf("version %s does not parse as a decimal int64: %v", s, err)
				}
				if state, got := v.classify(s); state != rvOurs || got != rv {
					t.Errorf("classify(own %s) = %v, %d", s, state, got)
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
