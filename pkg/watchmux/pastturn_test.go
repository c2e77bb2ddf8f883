package watchmux_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// countingGate is an Options.PastStates that counts the turns asked for
// and admits them while open.
type countingGate struct {
	mu     sync.Mutex
	asked  int
	closed bool
}

func (g *countingGate) turn(context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked++
	if g.closed {
		return errors.New("not your turn")
	}
	return nil
}

func (g *countingGate) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.asked
}

func (g *countingGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
}

// startGated starts a replica as startReplica does, with gate as its
// Options.PastStates.
func (c *fakeCluster) startGated(gate func(context.Context) error) *watchmux.Mux {
	m := newMux(watchmux.Options{PastStates: gate})
	m.SetNamespaceList(c.lister("namespaces"))
	m.SetSourceList(rolebindings, "", c.lister(rolebindings))
	c.mu.Lock()
	r := c.rev
	c.mu.Unlock()
	for _, key := range []string{"namespaces", rolebindings} {
		for _, o := range c.objects(key, r) {
			feedChange(m, fakeChange{key: key, obj: o})
		}
	}
	m.MarkSynced()
	m.Progress("namespaces", r)
	m.Progress(rolebindings, r)
	return m
}

// TestPastStatesGateOnlyCacheMisses is issue 38's case 8: only the exact
// lists a cache miss makes wait for the requester's turn. A version of the
// current state, one a catch-up finds equal to it, and a past state the
// caches hold are served without a turn, even while no turn comes; a past
// state that must be listed asks once per request, and is refused (429)
// when its turn does not come.
func TestPastStatesGateOnlyCacheMisses(t *testing.T) {
	t.Parallel()
	c := &fakeCluster{}
	c.write("namespaces", namespace(global), false)
	c.write("namespaces", namespace("team-x"), false)
	c.write(rolebindings, roleBinding("team-x", "a"), false)
	past := currentVersion(t, c.startReplica(rand.New(rand.NewPCG(38, 8))))
	c.write(rolebindings, roleBinding("team-x", "b"), false)
	gate := &countingGate{}
	m := c.startGated(gate.turn)
	// The current state as another replica names it: no history of m's.
	current := currentVersion(t, c.startReplica(rand.New(rand.NewPCG(38, 9))))

	resume := func(what, namespace, version string) error {
		t.Helper()
		w, err := m.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings, Namespace: namespace, ResourceVersion: version})
		if err == nil {
			w.Stop()
		}
		return err
	}
	expectAsked := func(what string, want int) {
		t.Helper()
		if got := gate.count(); got != want {
			t.Errorf("after %s: %d turns asked for, want %d", what, got, want)
		}
	}

	if err := resume("a resume from the current version", "team-x", current); err != nil {
		t.Fatal(err)
	}
	expectAsked("a resume from the current version", 0)
	ev, err := firstEventOrErr(t, m, watchmux.WatchOptions{Resource: rolebindings, Namespace: "team-x", ResourceVersion: past}, "the first resume from a past version")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := describeEvent(ev), "ADDED team-x/b local@team-x"; got != want {
		t.Fatalf("the first resume from %s: %s, want %s", past, got, want)
	}
	expectAsked("the first resume from a past version (a cache miss)", 1)

	// No turn comes from now on: only what lists from kube-apiserver waits.
	gate.close()
	for _, tc := range []struct{ name, namespace, version string }{
		{"the same past version again (its lists cached)", "team-x", past},
		{"the current version", "team-x", current},
		{"the current version, every namespace", "", current},
	} {
		if err := resume(tc.name, tc.namespace, tc.version); err != nil {
			t.Errorf("%s: %v, want it served without a turn", tc.name, err)
		}
	}
	if _, err := m.ResultsAt(t.Context(), past, rolebindings, "team-x", ""); err != nil {
		t.Errorf("an exact list at the cached past version: %v", err)
	}
	expectAsked("resumes and a list the caches serve", 1)

	// A version ahead of m whose state is m's own (a binding created and
	// deleted since m started: its informers never saw them): the
	// catch-up's lists take no turn.
	c.write(rolebindings, roleBinding("team-x", "z"), false)
	c.write(rolebindings, roleBinding("team-x", "z"), true)
	ahead := currentVersion(t, c.startReplica(rand.New(rand.NewPCG(38, 8))))
	if err := resume("a version ahead, equal to m's state", "team-x", ahead); err != nil {
		t.Errorf("a version ahead of m, equal to its state: %v, want it served", err)
	}
	if _, err := m.ResultsAt(t.Context(), ahead, rolebindings, "team-x", ""); err != nil {
		t.Errorf("an exact list at a version ahead, equal to m's state: %v", err)
	}
	expectAsked("a catch-up", 1)

	// A past state the caches don't hold lists, and its turn doesn't come.
	err = resume("every namespace from the past version (not cached)", "", past)
	if !apierrors.IsTooManyRequests(err) {
		t.Errorf("a resume that must list without its turn: %v, want 429", err)
	}
	if _, err := m.ResultsAt(t.Context(), past, rolebindings, "", ""); !apierrors.IsTooManyRequests(err) {
		t.Errorf("an exact list that must list without its turn: %v, want 429", err)
	}
	expectAsked("two requests that missed the caches", 3)
}
