package watchmux_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// TestHistoryOfAnotherNamespace: a namespaced watch from a version that
// names a namespace since deleted and created again (another uid) is not
// served from the history either: the old namespace's events (its items,
// added and deleted) are not for the readers of the new one, as a replica
// without that history answers (TestPastViewOfAnotherNamespace).
func TestHistoryOfAnotherNamespace(t *testing.T) {
	t.Parallel()
	c := &fakeCluster{}
	c.write("namespaces", namespace(global), false)
	c.write("namespaces", namespace("team-x"), false)
	a := c.startReplica(rand.New(rand.NewPCG(48, 2)))
	v := currentVersion(t, a)
	for _, ch := range []fakeChange{
		c.write(rolebindings, roleBinding("team-x", "secret"), false),
		c.write(rolebindings, roleBinding("team-x", "secret"), true),
		c.write("namespaces", namespace("team-x"), true),
	} {
		feedChange(a, ch)
	}
	again := namespace("team-x")
	again.UID = "another-uid"
	feedChange(a, c.write("namespaces", again, false))

	wantOldTeamXGone(t, a, v)

	// From a version after the replacement, the history serves it.
	after := currentVersion(t, a)
	feedChange(a, c.write(rolebindings, roleBinding("team-x", "mine"), false))
	f := watchAndFollow(t, a, watchmux.WatchOptions{Namespace: "team-x", ResourceVersion: after})
	if got, want := describeEvent(f.waitFor(t, 1)[0]), "ADDED team-x/mine local@team-x"; got != want {
		t.Errorf("a watch of the new team-x from %s: %s, want %s", after, got, want)
	}
}

// TestReplacedNamesBounded: namespaces created and deleted under ever new
// names (a CI's), none with a view item, stamp no event, so the history's
// floor never moves: the names remembered as deleted stay bounded all the
// same, and a watch of a namespace deleted and created again among them,
// from before, is still not served the old one's events.
func TestReplacedNamesBounded(t *testing.T) {
	t.Parallel()
	c := &fakeCluster{}
	c.write("namespaces", namespace(global), false)
	c.write("namespaces", namespace("team-x"), false)
	c.write(rolebindings, roleBinding("team-x", "secret"), false)
	a := c.startReplica(rand.New(rand.NewPCG(50, 1)))
	v := currentVersion(t, a)
	feedChange(a, c.write(rolebindings, roleBinding("team-x", "secret"), true))
	feedChange(a, c.write("namespaces", namespace("team-x"), true))
	again := namespace("team-x")
	again.UID = "another-uid"
	feedChange(a, c.write("namespaces", again, false))
	const churned = 20_000
	for i := range churned {
		name := fmt.Sprintf("ci-%d", i)
		feedChange(a, c.write("namespaces", namespace(name), false))
		feedChange(a, c.write("namespaces", namespace(name), true))
	}
	if n := a.ReplacedNames(); n > 5000 {
		t.Errorf("after %d namespaces created and deleted, %d names remembered, want a bound (at most 5000)", churned, n)
	}
	wantOldTeamXGone(t, a, v)
}

// wantOldTeamXGone asserts that a watch of team-x from v, a version from
// before the old team-x was deleted, answers 410 Gone rather than being
// served the old namespace's events.
func wantOldTeamXGone(t *testing.T, a *watchmux.Mux, v string) {
	t.Helper()
	w, err := a.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings, Namespace: "team-x", ResourceVersion: v})
	if err == nil {
		w.Stop()
		t.Fatalf("a watch of the new team-x from %s, before the old one was deleted, was served (the old team-x's events)", v)
	}
	if !apierrors.IsResourceExpired(err) {
		t.Errorf("a watch of the new team-x from %s: %v, want 410 Gone", v, err)
	}
}
