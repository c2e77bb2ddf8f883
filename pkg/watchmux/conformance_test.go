package watchmux

import (
	"strconv"
	"testing"
)

// TestCompareVersions checks the order a list's resourceVersion is served
// by: only versions of one instance compare.
func TestCompareVersions(t *testing.T) {
	t.Parallel()
	v := newVersions()
	v.counter = 10
	cur := v.current()
	other := newVersionsExcept(v.instance)
	other.counter = 10
	tests := []struct {
		name string
		rv   string
		want Order
	}{
		{name: "older", rv: format(cur - 3), want: Older},
		{name: "the instance's base", rv: format(v.instance << counterBits), want: Older},
		{name: "same", rv: format(cur), want: Same},
		{name: "newer", rv: format(cur + 1), want: Newer},
		{name: "another instance's", rv: format(other.current()), want: Incomparable},
		{name: "another instance's, numerically just above", rv: format((v.instance + 1) << counterBits), want: Incomparable},
		{name: "small integer, as from etcd", rv: "12", want: Incomparable},
		{name: "leading zero", rv: "0" + format(cur), want: Incomparable},
		{name: "garbage", rv: "abc", want: Incomparable},
		{name: "negative", rv: "-" + strconv.FormatUint(cur, 10), want: Incomparable},
	}
	for _, tt := range tests {
		if got := CompareVersions(tt.rv, format(cur)); got != tt.want {
			t.Errorf("%s: CompareVersions(%s, %d) = %v, want %v", tt.name, tt.rv, cur, got, tt.want)
		}
	}
	if got := CompareVersions(format(cur), "not-a-version"); got != Incomparable {
		t.Errorf("against a malformed current version: %v, want Incomparable", got)
	}
}
