package watchmux_test

import (
	"math/rand/v2"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestCatchUpDropsTheLateWrites is issue 38's case 4: replica B's informer
// lags while z is created (revision r) and deleted (r+1). A watch from
// replica A's version (RoleBindings at r+1) finds B's mirror equal to the
// list at r+1, and is served. When B's informer then delivers the late
// creation and deletion, B sends neither: etcd held B's mirror at r+1, so
// the writes before it sum to nothing, and a z the client would get
// existed at a revision older than the one it started from. Applied, the
// ADDED would carry a version that orders before A's (the out-of-order
// versions of the 30-minute robustness runs). B's next change after r+1 is
// then the client's next event, and its version orders after A's; a
// client resumed from it on replica C, started now, holds C's view.
func TestCatchUpDropsTheLateWrites(t *testing.T) {
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
	if o := rv.CompareStrings(v, currentVersion(t, b)); o != rv.Older && o != rv.Same {
		t.Errorf("after B delivered the late writes, its version %s is %s than A's %s: want the same or later", currentVersion(t, b), o, v)
	}
	next := c.write(rolebindings, roleBinding("team-x", "y"), false)
	lagging.deliver(t, next)
	evs := f.waitFor(t, 2)
	if got, want := describeEvent(evs[1]), "ADDED team-x/y local@team-x"; got != want {
		t.Fatalf("B's event after the late writes: %s, want %s (z was created and deleted before the version the client started from)", got, want)
	}
	client.apply(t, evs[1], "B's ADDED y")
	acc, err := meta.Accessor(evs[1].Object)
	if err != nil {
		t.Fatal(err)
	}
	cut := acc.GetResourceVersion()
	if o := rv.CompareStrings(v, cut); o != rv.Older {
		t.Errorf("B's ADDED y at %s is %s than A's %s: want later", cut, o, v)
	}

	// Replica C, started now, is complete at y's revision and has no
	// history of B's.
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
// the one it started from, before or after B delivered the late writes.
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
	lagging.deliver(t, c.write(rolebindings, roleBinding("team-x", "y"), false))
	for _, ev := range f.waitFor(t, 2)[1:] {
		acc, err := meta.Accessor(ev.Object)
		if err != nil {
			t.Fatal(err)
		}
		if o := rv.CompareStrings(v, acc.GetResourceVersion()); o != rv.Older && o != rv.Same {
			t.Errorf("B's %s at %s is %s than A's %s", describeEvent(ev), acc.GetResourceVersion(), o, v)
		}
	}
	if o := rv.CompareStrings(v, currentVersion(t, b)); o != rv.Older {
		t.Errorf("after B delivered the late writes and y, its version %s is %s than A's %s: want later", currentVersion(t, b), o, v)
	}
}

// TestCatchUpSeesTerminating: a catch-up compares all that the mirror keeps
// of a namespace, whether it is terminating included. Replica B's
// namespaces informer lags while team-x is marked for deletion; A's version
// names the namespaces after it. B's mirror, the same but for the deletion
// mark, is not the state at A's version: B does not reach it until its
// informer delivers the change (504 meanwhile), and then knows team-x is
// terminating. Found equal, B would drop the late change as one the
// catch-up already covers (passedLocked) and never know it, and the guards
// that read it (a Terminating namespace's locked items) would misjudge.
func TestCatchUpSeesTerminating(t *testing.T) {
	t.Parallel()
	c := &fakeCluster{}
	c.write("namespaces", namespace(global), false)
	c.write("namespaces", namespace("team-x"), false)
	c.write(rolebindings, roleBinding("team-x", "a"), false)
	b := trackedAt(t, c, &clusterLW{c: c})

	term := namespace("team-x")
	now := metav1.Now()
	term.DeletionTimestamp = &now
	marked := c.write("namespaces", term, false)
	a := c.startReplica(rand.New(rand.NewPCG(38, 11)))
	v := currentVersion(t, a)

	if _, _, err := b.ReachVersion(t.Context(), v); !apierrors.IsTimeout(err) {
		t.Fatalf("B, whose mirror lacks team-x's deletion mark, reaching A's %s: %v, want 504 (not the same state)", v, err)
	}
	b.ApplyNamespaceAt(marked.obj, false, marked.rev)
	if _, _, err := b.ReachVersion(t.Context(), v); err != nil {
		t.Fatalf("B reaching A's %s after its informer delivered the mark: %v", v, err)
	}
	terminating := false
	if _, err := b.Read(func(r watchmux.Reader) { terminating = r.Terminating("team-x") }); err != nil {
		t.Fatal(err)
	}
	if !terminating {
		t.Error("B does not know team-x is terminating after its informer delivered the deletion mark")
	}
}

// TestLowerCatchUpKeepsTheVersion: two clients come to replica B, whose
// RoleBindings informer lags, from versions of other replicas that name the
// quiet RoleBindings by two revisions (r2 and, later, r1 < r2), each the
// state B's mirror holds. B reaches each by its own revision, and the
// versions B issues keep naming RoleBindings by r2: the second catch-up
// must not move them back to r1 (it did in the 30-minute robustness run:
// a stream's versions went from a quiet part's r2 to r1 and back).
func TestLowerCatchUpKeepsTheVersion(t *testing.T) {
	t.Parallel()
	c := &fakeCluster{}
	c.write("namespaces", namespace(global), false)
	c.write("namespaces", namespace("team-x"), false)
	c.write(rolebindings, roleBinding("team-x", "a"), false)
	b := trackedAt(t, c, &clusterLW{c: c})
	// B's informer never delivers what follows: the written objects are
	// created and deleted again, so B's mirror is the state at each of
	// A1's and A2's versions.
	c.write(rolebindings, roleBinding("team-x", "z"), false)
	c.write(rolebindings, roleBinding("team-x", "z"), true)
	v1 := currentVersion(t, c.startReplica(rand.New(rand.NewPCG(38, 12))))
	c.write(rolebindings, roleBinding("team-x", "y"), false)
	c.write(rolebindings, roleBinding("team-x", "y"), true)
	v2 := currentVersion(t, c.startReplica(rand.New(rand.NewPCG(38, 13))))
	if o := rv.CompareStrings(v1, v2); o != rv.Older {
		t.Fatalf("A1's %s is %s than A2's %s: want older", v1, o, v2)
	}

	for _, v := range []string{v2, v1} {
		if _, _, err := b.ReachVersion(t.Context(), v); err != nil {
			t.Fatalf("B reaching %s: %v", v, err)
		}
		if o := rv.CompareStrings(v2, currentVersion(t, b)); o != rv.Older && o != rv.Same {
			t.Errorf("after B reached %s, its version %s is %s than A2's %s: want the same or later", v, currentVersion(t, b), o, v2)
		}
	}
	// Each is still reached, without waiting: B's state is each one's.
	for _, v := range []string{v1, v2} {
		_, same, err := b.ReachVersion(t.Context(), v)
		if err != nil || !same {
			t.Errorf("B reaching %s again: same=%v, %v; want the same state", v, same, err)
		}
	}
}
