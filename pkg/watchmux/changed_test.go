package watchmux_test

import (
	"testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// guardedWorld is the hierarchy (see delta_test.go) with sources the guards
// ask about:
//
//	implicit-global  g1, g2 (locked)
//	org              p1
//	team-a           p1 (shadows org's for team-a and team-a-1)
//	team-b           g1 (shadows the global one)
//	kube-system      g1 (not a tenant: its own view only)
//	solo             excludes rolebindings/g1 and rolebindings/g2 (the lock keeps g2)
//	x <-> y          a parent cycle
//	orphan           names parent ghost, which does not exist
func guardedWorld(more ...step) []step {
	return with(append([]step{
		addNS(namespace("solo", exclude("rolebindings/g1,rolebindings/g2"))),
		addNS(namespace("x", parent("y"))),
		addNS(namespace("y", parent("x"))),
		addNS(namespace("orphan", parent("ghost"))),
		putRB(global, "g1"),
		putRB(global, "g2", locked),
		putRB("org", "p1"),
		putRB("team-a", "p1"),
		putRB("team-b", "g1"),
		putRB("kube-system", "g1"),
	}, more...)...)
}

// muxOf returns a mux fed with steps, synced unless told otherwise.
func muxOf(t *testing.T, synced bool, steps []step, resources ...string) *watchmux.Mux {
	t.Helper()
	m := newMux(watchmux.Options{}, resources...)
	for _, s := range steps {
		s(m)
	}
	if synced {
		m.MarkSynced()
	}
	return m
}

// signalled reports whether Changed has a signal, taking it.
func signalled(m *watchmux.Mux) bool {
	select {
	case <-m.Changed():
		return true
	default:
		return false
	}
}

func TestChanged(t *testing.T) {
	t.Parallel()
	m := muxOf(t, false, guardedWorld())
	if signalled(m) {
		t.Errorf("Changed signalled before sync")
	}
	m.MarkSynced()
	if !signalled(m) {
		t.Errorf("Changed did not signal the sync")
	}
	if signalled(m) {
		t.Errorf("Changed signalled twice for one sync")
	}

	// Reads change nothing.
	if _, err := m.Read(func(r watchmux.Reader) {
		r.ResultsAfter(rolebindings, "org", watchmux.Edit{Namespace: global, Name: "g1", Item: &merge.Item{Namespace: global, Name: "g1", Object: roleBinding(global, "g1")}})
		r.Inherited(rolebindings, "org", "g1")
		r.LockedNames(rolebindings)
	}); err != nil {
		t.Fatalf("Read: %v", err)
	}
	if signalled(m) {
		t.Errorf("Changed signalled after reads only")
	}

	tests := []struct {
		name    string
		changes []step
	}{
		{name: "a source change", changes: []step{putRB(global, "g1", locked)}},
		{name: "a source deletion", changes: []step{delRB("org", "p1")}},
		{name: "a namespace change", changes: []step{addNS(namespace("solo", parent("org")))}},
		{name: "changes coalesce", changes: []step{putRB(global, "a"), putRB(global, "b"), addNS(namespace("new"))}},
	}
	for _, tc := range tests {
		for _, s := range tc.changes {
			s(m)
		}
		if !signalled(m) {
			t.Errorf("%s: Changed did not signal", tc.name)
		}
		if signalled(m) {
			t.Errorf("%s: Changed signalled more than once", tc.name)
		}
	}
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestNextChange: NextChange is closed by the sync and by each change after
// it, for every reader that took it (a broadcast, unlike Changed), and not
// by reads; a channel taken after a change waits for the next one.
func TestNextChange(t *testing.T) {
	t.Parallel()
	m := muxOf(t, false, guardedWorld())
	before := m.NextChange()
	if closed(before) {
		t.Fatalf("NextChange closed before sync")
	}
	m.MarkSynced()
	if !closed(before) {
		t.Errorf("NextChange not closed by the sync")
	}
	a, b := m.NextChange(), m.NextChange()
	if _, err := m.Read(func(r watchmux.Reader) { r.LockedNames(rolebindings) }); err != nil {
		t.Fatal(err)
	}
	if closed(a) {
		t.Errorf("NextChange closed by a read")
	}
	putRB(global, "g1", locked)(m)
	if !closed(a) || !closed(b) {
		t.Errorf("a source change closed the readers' channels: %t, %t; want both", closed(a), closed(b))
	}
	if closed(m.NextChange()) {
		t.Errorf("a channel taken after the change is closed already")
	}
}
