package watchmux_test

import (
	"math/rand/v2"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"

	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// deliver sends ch, a write the cluster made earlier, to the open watch:
// the informer's watch lagged behind it.
func (l *clusterLW) deliver(t *testing.T, ch fakeChange) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil || l.w.IsStopped() {
		t.Fatal("no open watch to deliver to")
	}
	l.w.Action(changeType(ch), ch.obj.DeepCopyObject())
}

// trackedAt is trackedReplica with its namespaces complete at the
// cluster's current revision, as a Tracker's list would leave them.
func trackedAt(t *testing.T, c *fakeCluster, lw *clusterLW) *watchmux.Mux {
	t.Helper()
	m := trackedReplica(t, c, lw)
	c.mu.Lock()
	r := c.rev
	c.mu.Unlock()
	m.Progress("namespaces", r)
	return m
}

// TestCatchUpDoesNotOutrunTheInformer is issue 38's case 4: replica B's
// informer lags while z is created (revision r) and deleted (r+1). A watch
// from replica A's version (RoleBindings at r+1) finds B's mirror equal to
// the list at r+1, and is served. The late creation must then be stamped
// with its own revision r, not r+1: a client that resumes elsewhere from
// the ADDED's version must get z's deletion. Had the catch-up moved B's
// part to r+1, the ADDED would name the state at r+1, which has no z, and
// the client would keep a z that exists nowhere.
func TestCatchUpDoesNotOutrunTheInformer(t *testing.T) {
	t.Parallel()
	c := &fakeCluster{}
	c.write("namespaces", namespace(global), false)
	c.write("namespaces", namespace("team-x"), false)
	c.write(rolebindings, roleBinding("team-x", "a"), false)
	lagging := &clusterLW{c: c}
	b := trackedAt(t, c, lagging)

	// Written while B's watch lags: it delivers neither yet.
	created := c.write(rolebindings, roleBinding("team-x", "z"), false)
	deleted := c.write(rolebindings, roleBinding("team-x", "z"), true)
	a := c.startReplica(rand.New(rand.NewPCG(38, 4)))
	v := currentVersion(t, a)
	client := currentView(t, a, "team-x")

	f := watchAndFollow(t, b, watchmux.WatchOptions{Namespace: "team-x", ResourceVersion: v, AllowBookmarks: true})
	if ev := f.waitFor(t, 1)[0]; ev.Type != watch.Bookmark {
		t.Fatalf("B's first event from %s: %s, want a bookmark (its mirror is the state at %s)", v, describeEvent(ev), v)
	}
	lagging.deliver(t, created)
	lagging.deliver(t, deleted)
	evs := f.waitFor(t, 3)
	if got, want := describeEvents(evs[1:]), []string{"ADDED team-x/z local@team-x", "DELETED team-x/z local@team-x"}; !equalStrings(got, want) {
		t.Fatalf("B's late events %v, want %v", got, want)
	}
	added := evs[1]
	if added.Type != watch.Added {
		added = evs[2]
	}
	client.apply(t, added, "B's late ADDED")
	acc, err := meta.Accessor(added.Object)
	if err != nil {
		t.Fatal(err)
	}
	cut := acc.GetResourceVersion()
	t.Logf("A's version %s; the client is cut off after B's ADDED z at %s", v, cut)

	// Replica C, started now, is complete at r+1 and has no history of B's.
	other := c.startTracked(t)
	w, err := other.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings, Namespace: "team-x", ResourceVersion: cut, AllowBookmarks: true})
	if err != nil {
		t.Fatalf("resuming on C from %s: %v", cut, err)
	}
	defer w.Stop()
	for _, ev := range readUntilBookmark(t, w) {
		client.apply(t, ev, "resumed on C")
	}
	if d := client.diff(currentView(t, other, "team-x")); len(d) > 0 {
		t.Errorf("the client resumed on C from B's ADDED differs from C's view: %v", d)
	}
}

// startTracked starts a replica fed through a Tracker of its own, at the
// cluster's current revision.
func (c *fakeCluster) startTracked(t *testing.T) *watchmux.Mux {
	t.Helper()
	return trackedAt(t, c, &clusterLW{c: c})
}

// TestCaughtUpVersionsNotOlder: once replica B found its mirror equal to
// the state at A's version (its informer lagging), the versions B issues
// name that source by A's revision, not by B's own older one: a client
// resumed on B from A's version never gets a version that orders before
// the one it started from. The late changes then name what B delivered.
func TestCaughtUpVersionsNotOlder(t *testing.T) {
	t.Parallel()
	c := &fakeCluster{}
	c.write("namespaces", namespace(global), false)
	c.write("namespaces", namespace("team-x"), false)
	c.write(rolebindings, roleBinding("team-x", "a"), false)
	lagging := &clusterLW{c: c}
	b := trackedAt(t, c, lagging)
	created := c.write(rolebindings, roleBinding("team-x", "z"), false)
	deleted := c.write(rolebindings, roleBinding("team-x", "z"), true)
	a := c.startReplica(rand.New(rand.NewPCG(38, 9)))
	v := currentVersion(t, a)

	f := watchAndFollow(t, b, watchmux.WatchOptions{Namespace: "team-x", ResourceVersion: v, AllowBookmarks: true})
	f.waitFor(t, 1)
	if o := rv.CompareStrings(v, currentVersion(t, b)); o != rv.Older && o != rv.Same {
		t.Errorf("after B caught up to A's %s, B's version %s is %s than it: want the same or later", v, currentVersion(t, b), o)
	}
	lagging.deliver(t, created)
	lagging.deliver(t, deleted)
	f.waitFor(t, 3)
	if o := rv.CompareStrings(v, currentVersion(t, b)); o != rv.Older && o != rv.Same {
		t.Errorf("after B delivered the late changes, its version %s is %s than A's %s", currentVersion(t, b), o, v)
	}
}
