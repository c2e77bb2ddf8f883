package watchmux_test

import (
	"slices"
	"testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

func names(rs []merge.Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Item.Name
	}
	return out
}

// TestFreeze: lists at one version share one frozen state, which merges
// what the mirror did at that version whatever changes after; namespaces
// come in storage key order.
func TestFreeze(t *testing.T) {
	t.Parallel()
	m := newMux(watchmux.Options{})
	for _, s := range []step{addNS(namespace(global)), addNS(namespace("team-a")), addNS(namespace("team-a-b")), putRB(global, "g1"), putRB("team-a", "local")} {
		s(m)
	}
	m.MarkSynced()
	f, err := m.Freeze(rolebindings)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := m.Freeze(rolebindings); again != f {
		t.Error("a second list at the same version froze the mirror again")
	}
	if want := []string{"implicit-global", "team-a-b", "team-a"}; !slices.Equal(f.Namespaces(), want) {
		t.Errorf("namespaces %v, want %v (storage key order)", f.Namespaces(), want)
	}
	putRB(global, "g2")(m)
	delRB("team-a", "local")(m)
	if got, want := names(f.Results("team-a", "")), []string{"g1", "local"}; !slices.Equal(got, want) {
		t.Errorf("frozen team-a after later changes: %v, want %v", got, want)
	}
	if n := f.Count("team-a"); n != 2 {
		t.Errorf("frozen team-a counts %d, want 2", n)
	}
	g, err := m.Freeze(rolebindings)
	if err != nil {
		t.Fatal(err)
	}
	if g == f || g.Version() == f.Version() {
		t.Fatalf("a list after changes shares the frozen state of %s", f.Version())
	}
	if got, want := names(g.Results("team-a", "")), []string{"g1", "g2"}; !slices.Equal(got, want) {
		t.Errorf("team-a now: %v, want %v", got, want)
	}
	for _, tc := range []struct {
		start, ns, skip string
	}{
		{"", "implicit-global", ""},
		{"team-a-b/x", "team-a-b", "x"},
		{"team-a-b/~", "team-a-b", "~"},
		{"team-a/local", "team-a", "local"},
		{"team-a-a/x", "team-a-b", ""},
	} {
		i, skip := g.After(tc.start)
		if i >= len(g.Namespaces()) || g.Namespaces()[i] != tc.ns || skip != tc.skip {
			t.Errorf("After(%q) = %d, %q; want namespace %s, %q", tc.start, i, skip, tc.ns, tc.skip)
		}
	}
}
