package watchmux_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// syncedMux returns a synced mux of the hierarchy with a global item g1 and
// an item p1 of org.
func syncedMux(t *testing.T, opts watchmux.Options, resources ...string) *watchmux.Mux {
	t.Helper()
	m := newMux(opts, resources...)
	for _, s := range with(putRB(global, "g1"), putRB("org", "p1")) {
		s(m)
	}
	m.MarkSynced()
	return m
}

func TestWatchResourceVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// rv returns the watch's resourceVersion, given the version of the
		// synced state and a watch of the view of solo started from it,
		// which has seen the changes.
		rv   func(t *testing.T, synced uint64, seen []watch.Event) string
		want []string
	}{
		{
			name: "empty: current items, then live",
			rv:   func(*testing.T, uint64, []watch.Event) string { return "" },
			want: []string{"ADDED solo/g1 global@implicit-global", "ADDED solo/l2 local@solo", "ADDED solo/l3 local@solo", "MODIFIED solo/g1 global@implicit-global"},
		},
		{
			name: "zero: current items, then live",
			rv:   func(*testing.T, uint64, []watch.Event) string { return "0" },
			want: []string{"ADDED solo/g1 global@implicit-global", "ADDED solo/l2 local@solo", "ADDED solo/l3 local@solo", "MODIFIED solo/g1 global@implicit-global"},
		},
		{
			name: "a list's version: every change after it",
			rv:   func(_ *testing.T, synced uint64, _ []watch.Event) string { return rvText(synced) },
			want: []string{"ADDED solo/l2 local@solo", "ADDED solo/l3 local@solo", "MODIFIED solo/g1 global@implicit-global"},
		},
		{
			name: "an event's version: every change after it",
			rv: func(t *testing.T, _ uint64, seen []watch.Event) string {
				acc, _ := meta.Accessor(seen[0].Object)
				return acc.GetResourceVersion()
			},
			want: []string{"ADDED solo/l3 local@solo", "MODIFIED solo/g1 global@implicit-global"},
		},
		{
			name: "the last event's version: live only",
			rv: func(t *testing.T, _ uint64, seen []watch.Event) string {
				acc, _ := meta.Accessor(seen[len(seen)-1].Object)
				return acc.GetResourceVersion()
			},
			want: []string{"MODIFIED solo/g1 global@implicit-global"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := syncedMux(t, watchmux.Options{})
			synced := currentRV(t, m)
			seen := watchAndFollow(t, m, watchmux.WatchOptions{Namespace: "solo", ResourceVersion: rvText(synced)})
			putRB("solo", "l2")(m)
			putRB("org", "l2")(m) // not solo's
			putRB("solo", "l3")(m)
			events := seen.waitFor(t, 2)

			f := watchAndFollow(t, m, watchmux.WatchOptions{Namespace: "solo", ResourceVersion: tt.rv(t, synced, events)})
			putRB(global, "g1")(m)
			got := f.waitFor(t, len(tt.want))
			var prev uint64
			for i, ev := range got {
				if g := describeEvent(ev); g != tt.want[i] {
					t.Errorf("event %d = %q, want %q", i, g, tt.want[i])
				}
				rv := rvOf(t, ev)
				if rv < prev {
					t.Errorf("event %d: version %d after %d", i, rv, prev)
				}
				prev = rv
			}
		})
	}
}

func TestWatchErrors(t *testing.T) {
	t.Parallel()
	other := syncedMux(t, watchmux.Options{})
	otherRV := currentRV(t, other)
	tests := []struct {
		name  string
		opts  watchmux.Options
		setup func(t *testing.T, m *watchmux.Mux) string // returns the watch's resourceVersion
		check func(error) bool
	}{
		{
			name: "another instance's version: expired",
			setup: func(t *testing.T, m *watchmux.Mux) string {
				rv := currentRV(t, m)
				if rv>>40 == otherRV>>40 {
					t.Skip("the two instances drew the same id (1 in 2^22)")
				}
				return rvText(otherRV)
			},
			check: apierrors.IsResourceExpired,
		},
		{
			name:  "a version from etcd: expired",
			setup: func(*testing.T, *watchmux.Mux) string { return "123" },
			check: apierrors.IsResourceExpired,
		},
		{
			name:  "garbage: expired",
			setup: func(*testing.T, *watchmux.Mux) string { return "not-a-version" },
			check: apierrors.IsResourceExpired,
		},
		{
			name: "older than the history: expired",
			opts: watchmux.Options{HistorySize: 2},
			setup: func(t *testing.T, m *watchmux.Mux) string {
				rv := currentRV(t, m)
				putRB("solo", "a")(m)
				putRB("solo", "b")(m)
				putRB("solo", "c")(m)
				return rvText(rv)
			},
			check: apierrors.IsResourceExpired,
		},
		{
			name: "a version ahead of the mux: waits, then too large",
			setup: func(t *testing.T, m *watchmux.Mux) string {
				v, err := resourceversion.Parse(rvText(currentRV(t, m)))
				if err != nil {
					t.Fatal(err)
				}
				v.Vector[len(v.Vector)-1] += 1000
				return v.String()
			},
			check: apierrors.IsTimeout,
		},
		{
			name: "another fingerprint (a rollout changed the semantics or configuration): expired",
			setup: func(t *testing.T, m *watchmux.Mux) string {
				v, err := resourceversion.Parse(rvText(currentRV(t, m)))
				if err != nil {
					t.Fatal(err)
				}
				v.Fingerprint ^= 2
				return v.String()
			},
			check: apierrors.IsResourceExpired,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := syncedMux(t, tt.opts)
			rv := tt.setup(t, m)
			// A version ahead waits as long as the request may.
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			w, err := m.Watch(ctx, watchmux.WatchOptions{Resource: rolebindings, ResourceVersion: rv})
			if err == nil {
				w.Stop()
				t.Fatalf("watch from %s succeeded", rv)
			}
			if !tt.check(err) {
				t.Errorf("watch from %s: unexpected error %v", rv, err)
			}
		})
	}
}

func TestWatchHistoryBoundary(t *testing.T) {
	t.Parallel()
	m := syncedMux(t, watchmux.Options{HistorySize: 2})
	rv0 := currentRV(t, m)
	putRB("solo", "a")(m)
	rv1 := currentRV(t, m)
	putRB("solo", "b")(m)
	putRB("solo", "c")(m) // drops a's event: resuming from rv1 is still complete
	for _, tt := range []struct {
		name string
		rv   uint64
		want []string
		ok   bool
	}{
		{name: "before the oldest dropped event", rv: rv0},
		{name: "at the newest dropped event", rv: rv1, want: []string{"ADDED solo/b local@solo", "ADDED solo/c local@solo"}, ok: true},
	} {
		w, err := m.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings, Namespace: "solo", ResourceVersion: rvText(tt.rv)})
		if !tt.ok {
			if !apierrors.IsResourceExpired(err) {
				t.Errorf("%s: err = %v, want expired", tt.name, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		got := follow(t, w).waitFor(t, len(tt.want))
		if g := describeEvents(got); !slices.Equal(g, tt.want) {
			t.Errorf("%s: got %q, want %q", tt.name, g, tt.want)
		}
	}
}

func TestNotSynced(t *testing.T) {
	t.Parallel()
	m := newMux(watchmux.Options{})
	for _, s := range with(putRB(global, "g1")) {
		s(m)
	}
	if m.HasSynced() {
		t.Fatal("synced before MarkSynced")
	}
	if _, err := m.Read(func(watchmux.Reader) { t.Error("Read called f before sync") }); !watchmux.IsNotSynced(err) {
		t.Errorf("Read before sync: err = %v, want not synced", err)
	}
	if w, err := m.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings}); !watchmux.IsNotSynced(err) {
		if w != nil {
			w.Stop()
		}
		t.Errorf("Watch before sync: err = %v, want not synced", err)
	}
	if watchmux.IsNotSynced(apierrors.NewResourceExpired("x")) || watchmux.IsNotSynced(nil) {
		t.Error("IsNotSynced is true for other errors")
	}
	m.MarkSynced()
	m.MarkSynced() // idempotent
	if !m.HasSynced() {
		t.Fatal("not synced after MarkSynced")
	}
	got, rv := readViews(t, m, rolebindings)
	if len(got) != 6 || rv == 0 {
		t.Errorf("after sync: %d items at %d, want the 6 fed before", len(got), rv)
	}
}

func TestSendInitialEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		namespace string
		rv        func(synced uint64) string
		send      *bool
		// noBookmarks leaves allowWatchBookmarks unset.
		noBookmarks bool
		want        []string
		end         bool // an initial-events-end bookmark after the initial items
	}{
		{
			name:      "watch-list of one namespace",
			namespace: "team-b",
			send:      ptr.To(true),
			want:      []string{"ADDED team-b/g1 global@implicit-global", "ADDED team-b/p1 parent@org"},
			end:       true,
		},
		{
			name: "watch-list of every namespace",
			send: ptr.To(true),
			want: []string{
				"ADDED implicit-global/g1 local@implicit-global",
				"ADDED org/g1 global@implicit-global", "ADDED org/p1 local@org",
				"ADDED solo/g1 global@implicit-global",
				"ADDED team-a-1/g1 global@implicit-global", "ADDED team-a-1/p1 parent@org",
				"ADDED team-a/g1 global@implicit-global", "ADDED team-a/p1 parent@org",
				"ADDED team-b/g1 global@implicit-global", "ADDED team-b/p1 parent@org",
			},
			end: true,
		},
		{
			name:      "watch-list from a version: a snapshot all the same",
			namespace: "team-b",
			rv:        func(synced uint64) string { return rvText(synced) },
			send:      ptr.To(true),
			want:      []string{"ADDED team-b/g1 global@implicit-global", "ADDED team-b/p1 parent@org"},
			end:       true,
		},
		{
			// What a plain watch without a resourceVersion is once
			// k8s.io/apiserver has defaulted sendInitialEvents=true: the
			// items, and no bookmark it did not ask for (issue 12).
			name:        "initial events without bookmarks: no initial-events-end bookmark",
			namespace:   "team-b",
			send:        ptr.To(true),
			noBookmarks: true,
			want:        []string{"ADDED team-b/g1 global@implicit-global", "ADDED team-b/p1 parent@org"},
		},
		{
			name:      "no initial events asked for: from now on",
			namespace: "team-b",
			send:      ptr.To(false),
		},
		{
			name:      "no initial events from a version: the changes after it",
			namespace: "team-b",
			rv:        func(synced uint64) string { return rvText(synced) },
			send:      ptr.To(false),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := syncedMux(t, watchmux.Options{})
			synced := currentRV(t, m)
			var rv string
			if tt.rv != nil {
				rv = tt.rv(synced)
			}
			f := watchAndFollow(t, m, watchmux.WatchOptions{Namespace: tt.namespace, ResourceVersion: rv, SendInitialEvents: tt.send, AllowBookmarks: !tt.noBookmarks})
			putRB("team-b", "live")(m)
			n := len(tt.want) + 1
			if tt.end {
				n++
			}
			got := f.waitFor(t, n)
			initial := got[:len(tt.want)]
			if g := describeEvents(initial); !slices.Equal(g, tt.want) {
				t.Errorf("initial events:\n got %q\nwant %q", g, tt.want)
			}
			for _, ev := range initial {
				if rv := rvOf(t, ev); rv != synced {
					t.Errorf("initial %s at version %d, want the snapshot's %d", describeEvent(ev), rv, synced)
				}
			}
			if tt.end {
				ev := got[len(tt.want)]
				acc, err := meta.Accessor(ev.Object)
				if ev.Type != watch.Bookmark || err != nil {
					t.Fatalf("after the initial events: %s %T, want a BOOKMARK", ev.Type, ev.Object)
				}
				if acc.GetAnnotations()["k8s.io/initial-events-end"] != "true" {
					t.Errorf("bookmark annotations %v, want k8s.io/initial-events-end", acc.GetAnnotations())
				}
				if rv := rvOf(t, ev); rv != synced {
					t.Errorf("initial-events-end bookmark at %d, want the snapshot's %d", rv, synced)
				}
				if acc.GetName() != "" || acc.GetNamespace() != "" {
					t.Errorf("bookmark names %s/%s, want an empty object", acc.GetNamespace(), acc.GetName())
				}
			}
			if g, want := describeEvent(got[n-1]), "ADDED team-b/live local@team-b"; g != want {
				t.Errorf("live event %q, want %q", g, want)
			}
		})
	}
}

func TestBookmarks(t *testing.T) {
	t.Parallel()
	const interval = 10 * time.Second
	clock := clocktesting.NewFakeClock(time.Now())
	m := newMux(watchmux.Options{Clock: clock, BookmarkInterval: interval})
	for _, s := range hierarchy() {
		s(m)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	testwait.For(t, "the mux syncs and its bookmark ticker starts", func() bool { return m.HasSynced() && clock.HasWaiters() })
	synced := rvText(currentRV(t, m))

	withBookmarks := watchAndFollow(t, m, watchmux.WatchOptions{Namespace: "solo", ResourceVersion: synced, AllowBookmarks: true})
	without := watchAndFollow(t, m, watchmux.WatchOptions{Namespace: "solo", ResourceVersion: synced})

	// A change elsewhere moves the version on: a bookmark tells solo's watchers.
	putRB("org", "p1")(m)
	rv1 := currentRV(t, m)
	clock.Step(interval)
	got := withBookmarks.waitFor(t, 1)
	if got[0].Type != watch.Bookmark || rvOf(t, got[0]) != rv1 {
		t.Fatalf("after a tick: %s at %d, want a BOOKMARK at %d", got[0].Type, rvOf(t, got[0]), rv1)
	}
	if acc, _ := meta.Accessor(got[0].Object); acc.GetAnnotations()["k8s.io/initial-events-end"] != "" {
		t.Errorf("periodic bookmark annotated %v", acc.GetAnnotations())
	}

	// The next tick, after a change in solo: its event, then the bookmark.
	putRB("solo", "s1")(m)
	rv2 := currentRV(t, m)
	clock.Step(interval)
	got = withBookmarks.waitFor(t, 3)
	if describeEvent(got[1]) != "ADDED solo/s1 local@solo" || got[2].Type != watch.Bookmark || rvOf(t, got[2]) != rv2 {
		t.Errorf("after a change and a tick: %q, %s at %d; want ADDED solo/s1 then a BOOKMARK at %d", describeEvent(got[1]), got[2].Type, rvOf(t, got[2]), rv2)
	}

	// Without bookmarks asked for: the event only.
	putRB("solo", "s2")(m)
	gotWithout := without.waitFor(t, 2)
	for _, ev := range gotWithout {
		if ev.Type == watch.Bookmark {
			t.Errorf("a watcher that did not ask for bookmarks got one")
		}
	}
	if g := describeEvents(gotWithout); !slices.Equal(g, []string{"ADDED solo/s1 local@solo", "ADDED solo/s2 local@solo"}) {
		t.Errorf("without bookmarks: %q", g)
	}

	// A watch started after the last change gets a bookmark at its start
	// while solo is quiet, then one past the next change.
	fresh := watchAndFollow(t, m, watchmux.WatchOptions{Namespace: "team-b", AllowBookmarks: true, SendInitialEvents: ptr.To(false)})
	clock.Step(interval)
	got = fresh.waitFor(t, 1)
	if got[0].Type != watch.Bookmark || rvOf(t, got[0]) != rv2+1 {
		t.Errorf("fresh watcher, quiet: first event %s at %d, want a BOOKMARK at its start %d", got[0].Type, rvOf(t, got[0]), rv2+1)
	}
	putRB("solo", "s3")(m)
	rv3 := currentRV(t, m)
	clock.Step(interval)
	got = fresh.waitFor(t, 2)
	if got[1].Type != watch.Bookmark || rvOf(t, got[1]) != rv3 {
		t.Errorf("fresh watcher: second event %s at %d, want a BOOKMARK at %d", got[1].Type, rvOf(t, got[1]), rv3)
	}
}

// TestBookmarksWhileQuiet is issue 38's case 7: a watcher that asked for
// bookmarks gets one every interval while the views are quiet, at the
// current version, whether it watched from "", "0" or the current version;
// one that did not ask gets none. Five minutes of a fake clock.
func TestBookmarksWhileQuiet(t *testing.T) {
	t.Parallel()
	const interval = time.Minute
	clock := clocktesting.NewFakeClock(time.Now())
	m := newMux(watchmux.Options{Clock: clock, BookmarkInterval: interval})
	for _, s := range with(putRB(global, "g1"), putRB("solo", "s0")) {
		s(m)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	testwait.For(t, "the mux syncs and its bookmark ticker starts", func() bool { return m.HasSynced() && clock.HasWaiters() })
	views, _ := readViews(t, m, rolebindings)
	inSolo := 0
	for k := range views {
		if strings.HasPrefix(k, "solo/") {
			inSolo++
		}
	}
	if inSolo != 2 {
		t.Fatalf("solo's view holds %d items, want g1 and s0", inSolo)
	}
	current, err := m.Read(func(watchmux.Reader) {})
	if err != nil {
		t.Fatal(err)
	}

	type quiet struct {
		name string
		opts watchmux.WatchOptions
		f    *follower
		// initial is how many events come before the bookmarks.
		initial int
	}
	watchers := []*quiet{
		{name: `from ""`, opts: watchmux.WatchOptions{Namespace: "solo", AllowBookmarks: true}},
		{name: `from "0"`, opts: watchmux.WatchOptions{Namespace: "solo", ResourceVersion: "0", AllowBookmarks: true}},
		{name: "from the current version", opts: watchmux.WatchOptions{Namespace: "solo", ResourceVersion: current, AllowBookmarks: true}},
		{name: "of every namespace", opts: watchmux.WatchOptions{ResourceVersion: current, AllowBookmarks: true}},
		{name: "watch-list", opts: watchmux.WatchOptions{Namespace: "solo", SendInitialEvents: ptr.To(true), AllowBookmarks: true}},
	}
	without := []*quiet{
		{name: `from "" without bookmarks`, opts: watchmux.WatchOptions{Namespace: "solo"}},
		{name: "from the current version without bookmarks", opts: watchmux.WatchOptions{Namespace: "solo", ResourceVersion: current}},
	}
	for _, q := range append(slices.Clone(watchers), without...) {
		q.f = watchAndFollow(t, m, q.opts)
		if q.opts.ResourceVersion != current {
			// The initial items (and watch-list's end bookmark) come first.
			q.initial = inSolo
			if q.opts.SendInitialEvents != nil {
				q.initial++
			}
			q.f.waitFor(t, q.initial)
		}
	}

	const ticks = 5 // five minutes of the fake clock
	for tick := 1; tick <= ticks; tick++ {
		clock.Step(interval)
		for _, q := range watchers {
			got := q.f.waitFor(t, q.initial+tick)[q.initial+tick-1]
			acc, err := meta.Accessor(got.Object)
			if got.Type != watch.Bookmark || err != nil || acc.GetResourceVersion() != current {
				t.Fatalf("%s, minute %d: %s %s, want a BOOKMARK at the current version %s", q.name, tick, got.Type, describe(got.Object), current)
			}
		}
	}
	// An event after the bookmarks: whatever reached a watcher's buffer
	// before it has been received once it has.
	putRB("solo", "after")(m)
	for _, q := range append(slices.Clone(watchers), without...) {
		n := q.initial + 1
		if q.opts.AllowBookmarks {
			n += ticks
		}
		got := q.f.waitFor(t, n)
		if last := describeEvent(got[n-1]); last != "ADDED solo/after local@solo" {
			t.Errorf("%s: event %d is %q, want ADDED solo/after", q.name, n, last)
		}
		bookmarks := 0
		for _, ev := range got[q.initial:] {
			if ev.Type == watch.Bookmark {
				bookmarks++
			}
		}
		if want := n - q.initial - 1; bookmarks != want {
			t.Errorf("%s: %d bookmarks in %d minutes, want %d", q.name, bookmarks, ticks, want)
		}
	}
}

func TestWatchFilters(t *testing.T) {
	t.Parallel()
	scopeIs := func(scope merge.Scope) func(runtime.Object) bool {
		return func(obj runtime.Object) bool {
			acc, err := meta.Accessor(obj)
			return err == nil && acc.GetLabels()[v1alpha1.LabelScope] == string(scope)
		}
	}
	tests := []struct {
		name string
		opts watchmux.WatchOptions
		want []string
	}{
		{
			name: "global scope selector, one namespace",
			opts: watchmux.WatchOptions{Namespace: "team-a", Matches: scopeIs(merge.ScopeGlobal)},
			want: []string{
				"ADDED team-a/g1 global@implicit-global",   // initial
				"DELETED team-a/g1 global@implicit-global", // shadowed: leaves the selector
				"ADDED team-a/g1 global@implicit-global",   // shadow deleted: enters it
				"MODIFIED team-a/g1 global@implicit-global",
				"DELETED team-a/g1 global@implicit-global",
			},
		},
		{
			name: "local scope selector, one namespace",
			opts: watchmux.WatchOptions{Namespace: "team-a", Matches: scopeIs(merge.ScopeLocal)},
			want: []string{
				"ADDED team-a/g1 local@team-a",
				"DELETED team-a/g1 local@team-a",
				"ADDED team-a/l1 local@team-a",
			},
		},
		{
			name: "global scope selector, every namespace",
			opts: watchmux.WatchOptions{Matches: scopeIs(merge.ScopeGlobal)},
			want: []string{
				"ADDED org/g1 global@implicit-global", "ADDED solo/g1 global@implicit-global",
				"ADDED team-a-1/g1 global@implicit-global", "ADDED team-a/g1 global@implicit-global",
				"ADDED team-b/g1 global@implicit-global", // initial
				"DELETED team-a-1/g1 global@implicit-global", "DELETED team-a/g1 global@implicit-global",
				"ADDED team-a-1/g1 global@implicit-global", "ADDED team-a/g1 global@implicit-global",
				"MODIFIED org/g1 global@implicit-global", "MODIFIED solo/g1 global@implicit-global",
				"MODIFIED team-a-1/g1 global@implicit-global", "MODIFIED team-a/g1 global@implicit-global",
				"MODIFIED team-b/g1 global@implicit-global",
				"DELETED org/g1 global@implicit-global", "DELETED solo/g1 global@implicit-global",
				"DELETED team-a-1/g1 global@implicit-global", "DELETED team-a/g1 global@implicit-global",
				"DELETED team-b/g1 global@implicit-global",
			},
		},
		{
			name: "name",
			opts: watchmux.WatchOptions{Namespace: "team-a", Name: "l1"},
			want: []string{"ADDED team-a/l1 local@team-a"},
		},
		{
			name: "name, every namespace",
			opts: watchmux.WatchOptions{Name: "p1"},
			want: []string{"ADDED org/p1 local@org", "ADDED team-a-1/p1 parent@org", "ADDED team-a/p1 parent@org", "ADDED team-b/p1 parent@org"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// In a bubble, synctest.Wait says when the fan-out has sent
			// everything it will: the check that no other event came is not
			// vacuous.
			synctest.Test(t, func(t *testing.T) {
				m := syncedMux(t, watchmux.Options{})
				opts := tt.opts
				opts.AllowBookmarks = true
				f := watchAndFollow(t, m, opts)
				putRB("team-a", "g1")(m) // shadows g1 in team-a and team-a-1
				delRB("team-a", "g1")(m)
				putRB("team-a", "l1")(m)
				putRB(global, "g1")(m)
				delRB(global, "g1")(m)
				putRB("solo", "last")(m)
				got := f.waitFor(t, len(tt.want))
				// Events of one change reach namespaces in any order: compare
				// each namespace's sequence.
				byNS := func(lines []string) map[string][]string {
					out := map[string][]string{}
					for _, l := range lines {
						_, key, _ := strings.Cut(l, " ")
						ns, _, _ := strings.Cut(key, "/")
						out[ns] = append(out[ns], l)
					}
					return out
				}
				var g []string
				for _, ev := range got {
					g = append(g, describeEvent(ev))
				}
				gotBy, wantBy := byNS(g), byNS(tt.want)
				for ns := range wantBy {
					if !slices.Equal(gotBy[ns], wantBy[ns]) {
						t.Errorf("%s:\n got %q\nwant %q", ns, gotBy[ns], wantBy[ns])
					}
				}
				for ns := range gotBy {
					if _, ok := wantBy[ns]; !ok {
						t.Errorf("unexpected events in %s: %q", ns, gotBy[ns])
					}
				}
				for _, ev := range got {
					if ev.Type == watch.Deleted && opts.Matches != nil && !opts.Matches(ev.Object) {
						t.Errorf("%s carries an object outside the selector: the item as it last matched is expected", describeEvent(ev))
					}
				}
				synctest.Wait()
				if extra := f.received()[len(tt.want):]; len(extra) > 0 {
					t.Errorf("unexpected events: %q", describeEvents(extra))
				}
			})
		})
	}
}
