package resourceversion_test

import (
	"testing"

	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, v := range []rv.Version{
		{Fingerprint: 0xabc, Vector: []uint64{5, 9}},
		{Fingerprint: 1, Vector: []uint64{5, 9, 0}, Seq: 0x1c0000000000042},
		{Fingerprint: 1, Vector: []uint64{6, 9}, Mid: &rv.Mid{K: 0, Prev: 5, Index: 2, Namespace: "team-a"}, Seq: 7},
		{Fingerprint: 1, Vector: []uint64{6, 9, 4}, Mid: &rv.Mid{K: 0, Prev: 5, Index: 0, Namespace: "team-a-1", Also: []rv.Part{{K: 1, Prev: 3}, {K: 2, Prev: 0}}}},
		{Fingerprint: 1, Vector: nil},
	} {
		s := v.String()
		for i := 0; i < len(s); i++ {
			if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
				t.Errorf("%q: character %q would not splice into JSON as it is", s, c)
			}
		}
		got, err := rv.Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q): %v", s, err)
		}
		if got.String() != s || rv.Compare(got, v) != rv.Same {
			t.Errorf("Parse(%q) = %+v", s, got)
		}
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"", "0", "12", "4711", // digits only: another binary's, or etcd's
		"f1", "v1-2", "f1.v1-x", "fz.v1", "f1.v1.p5-0-0-ns", // p's source out of range
		"f1.v3.p0-4-0-ns", // prev after the vector's revision
		"f1.v3.p0-1-0-",   // no namespace
		"f1.v3.s0", "f1.v3.q1", "f1.v3.s1.s2",
		"f1.v3-4.a1-2",                  // further sources without a change
		"f1.v3-4.p0-1-0-ns.a0-2",        // a further source that is p's
		"f1.v3-4-5.p1-1-0-ns.a0-2",      // further sources before p's
		"f1.v3-4-5.p0-1-0-ns.a2-6",      // prev after the vector's revision
		"f1.v3-4-5.p0-1-0-ns.a2",        // no prev
		"f1.v3-4-5.p0-1-0-ns.a1-1.a2-1", // twice
		"f1.v3-4-5.p0-1-0-ns.s1.a1-1",   // after the hint
	} {
		if _, err := rv.Parse(s); err == nil {
			t.Errorf("Parse(%q) succeeded", s)
		}
	}
}

// TestCompare checks the order of vectors: component-wise, (5,9) and
// (6,1) incomparable however a client would order their texts.
func TestCompare(t *testing.T) {
	t.Parallel()
	v := func(s string) rv.Version {
		x, err := rv.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	tests := []struct {
		a, b string
		want rv.Order
	}{
		{"f1.v5-9", "f1.v5-9", rv.Same},
		{"f1.v5-9.s1", "f1.v5-9.s2", rv.Same}, // two replicas at one state
		{"f1.v5-9", "f1.v6-9", rv.Older},
		{"f1.v6-9", "f1.v5-9", rv.Newer},
		{"f1.v5-9", "f1.v6-1", rv.Concurrent},
		{"f1.v5-9", "f2.v5-9", rv.Incomparable},
		{"f1.v5-9", "f1.v5-9-0", rv.Incomparable},
		{"f1.v6-9.p0-5-0-b", "f1.v6-9", rv.Older}, // inside the change to (6,9)
		{"f1.v6-9", "f1.v6-9.p0-5-0-b", rv.Newer},
		{"f1.v6-9.p0-5-0-b", "f1.v6-9.p0-5-1-b", rv.Older},
		{"f1.v6-9.p0-5-3-b", "f1.v6-9.p0-5-0-c", rv.Older},
		{"f1.v6-9.p0-5-0-b", "f1.v6-9.p0-4-0-b", rv.Concurrent},
		{"f1.v6-9.p0-5-0-b.a1-2", "f1.v6-9.p0-5-0-b.a1-2", rv.Same},
		{"f1.v6-9.p0-5-0-b.a1-2", "f1.v6-9.p0-5-2-b.a1-2", rv.Older},
		{"f1.v6-9.p0-5-0-b.a1-2", "f1.v6-9.p0-5-0-b", rv.Concurrent},
		{"f1.v6-9.p0-5-0-b.a1-2", "f1.v6-9", rv.Older},
	}
	for _, tt := range tests {
		if got := rv.Compare(v(tt.a), v(tt.b)); got != tt.want {
			t.Errorf("Compare(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
	if rv.CompareStrings("4711", "f1.v1") != rv.Incomparable {
		t.Error("a decimal version compares")
	}
	if !rv.AtLeast([]uint64{5, 9}, []uint64{5, 8}) || rv.AtLeast([]uint64{6, 1}, []uint64{5, 9}) {
		t.Error("AtLeast is not component-wise")
	}
}
