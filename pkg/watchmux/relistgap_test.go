package watchmux_test

import (
	"math/rand/v2"
	"testing"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// TestResumeAcrossAListThatChangedNothing: a Tracker's list that finds the
// informer's store as it was (a relist after a 410 or a kube-apiserver
// restart), or finds nothing at all (a replica started with no objects of
// a source), says the state is complete at the list's revision, not that
// nothing changed since the source's last change: the informer saw none of
// the writes in between. Replica B's source misses z, created and deleted
// while its watch was gone (or before it started); replica A saw z. A
// client cut off on A while it held z resumes on B from A's version: it
// must get z's deletion, not a bookmark saying it holds B's views.
func TestResumeAcrossAListThatChangedNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// keep: team-x/a exists throughout, so B's relist finds its store
		// as it was; without it B's source is empty from the start.
		keep bool
	}{{name: "a relist that found the store as it was", keep: true}, {name: "a replica started with no objects", keep: false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &fakeCluster{}
			c.write("namespaces", namespace(global), false)
			c.write("namespaces", namespace("team-x"), false)
			lw := &clusterLW{c: c}
			var b *watchmux.Mux
			release := func() {}
			var early string // a version before the gap
			if tc.keep {
				c.write(rolebindings, roleBinding("team-x", "a"), false)
				b = trackedAt(t, c, lw)
				early = currentVersion(t, c.startReplica(rand.New(rand.NewPCG(48, 3))))
				release = lw.expire(t)
			}
			lw.write(roleBinding("team-x", "z"), false)
			a := c.startReplica(rand.New(rand.NewPCG(48, 1)))
			v := currentVersion(t, a)
			client := currentView(t, a, "team-x")
			if _, ok := client["team-x/z"]; !ok {
				t.Fatalf("replica A's view of team-x %v lacks z", client)
			}
			lw.write(roleBinding("team-x", "z"), true)
			if tc.keep {
				release()
			} else {
				b = trackedAt(t, c, lw)
			}
			c.mu.Lock()
			now := c.rev
			c.mu.Unlock()
			b.Progress("namespaces", now)
			testwait.For(t, "B's source to list past z's deletion", func() bool {
				return rv.CompareStrings(currentVersion(t, b), v) == rv.Newer
			})

			past, err := b.ResultsAt(t.Context(), v, rolebindings, "team-x", "")
			if err != nil {
				t.Fatalf("an exact list at %s on B: %v", v, err)
			}
			if !holds(past, "z") {
				t.Errorf("an exact list at %s on B lacks z: %v", v, past)
			}

			w, err := b.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings, Namespace: "team-x", ResourceVersion: v, AllowBookmarks: true})
			if err != nil {
				t.Fatalf("resuming on B from %s: %v", v, err)
			}
			defer w.Stop()
			evs := readUntilBookmark(t, w)
			for _, ev := range evs {
				client.apply(t, ev, "resumed on B")
			}
			if d := client.diff(currentView(t, b, "team-x")); len(d) > 0 {
				t.Errorf("the client resumed on B from %s (events %v) differs from B's view: %v", v, describeEvents(evs), d)
			}

			if early == "" {
				return
			}
			// A client from before the gap holds B's state: served as
			// such, with nothing listed.
			c.mu.Lock()
			listed := len(c.lists)
			c.mu.Unlock()
			ev := firstEvent(t, b, watchmux.WatchOptions{Resource: rolebindings, Namespace: "team-x", ResourceVersion: early, AllowBookmarks: true}, "resume on B from "+early)
			if ev.Type != watch.Bookmark {
				t.Errorf("resumed on B from %s, before the gap: first event %s, want a bookmark", early, describeEvent(ev))
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.lists) != listed {
				t.Errorf("resuming on B from %s, before the gap, listed %v", early, c.lists[listed:])
			}
		})
	}
}

// holds reports whether results hold an item of that name.
func holds(results []watchmux.NamespaceResults, name string) bool {
	for _, nr := range results {
		for _, r := range nr.Results {
			if r.Item.Name == name {
				return true
			}
		}
	}
	return false
}

// TestResumeAcrossTwoListsThatChangedNothing: a client from before two
// quiet relists of a source (its watch lost twice) still holds the current
// state: each list found the mirror's, so it is served as such, with
// nothing listed, as after one.
func TestResumeAcrossTwoListsThatChangedNothing(t *testing.T) {
	t.Parallel()
	c := &fakeCluster{}
	c.write("namespaces", namespace(global), false)
	c.write("namespaces", namespace("team-x"), false)
	c.write(rolebindings, roleBinding("team-x", "a"), false)
	early := currentVersion(t, c.startReplica(rand.New(rand.NewPCG(50, 1))))
	b := c.startReplica(rand.New(rand.NewPCG(50, 2)))
	for range 2 {
		c.write("roles", roleBinding("team-x", "unrelated"), false) // moves the cluster's revision only
		c.mu.Lock()
		now := c.rev
		c.mu.Unlock()
		b.Listed(rolebindings, now)
		b.Progress("namespaces", now)
	}
	c.mu.Lock()
	listed := len(c.lists)
	c.mu.Unlock()
	ev, err := firstEventOrErr(t, b, watchmux.WatchOptions{Resource: rolebindings, Namespace: "team-x", ResourceVersion: early, AllowBookmarks: true}, "resume on B from "+early)
	if err != nil {
		t.Fatalf("resuming on B from %s, before both gaps: %v", early, err)
	}
	if ev.Type != watch.Bookmark {
		t.Errorf("resumed on B from %s, before both gaps: first event %s, want a bookmark", early, describeEvent(ev))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.lists) != listed {
		t.Errorf("resuming on B from %s, before both gaps, listed %v", early, c.lists[listed:])
	}
}
