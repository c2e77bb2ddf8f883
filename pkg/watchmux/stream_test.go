package watchmux_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/sourcefeed"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// clusterLW lists and watches the fake cluster's RoleBindings as a
// client-go reflector does: a list of the current objects, a watch that
// replays the writes after its revision and then gets the live ones, and
// expire, which ends the watch with 410 Gone so that the reflector relists
// (held by gate until the test releases it).
type clusterLW struct {
	c    *fakeCluster
	mu   sync.Mutex
	w    *watch.FakeWatcher
	gate chan struct{}
}

func (l *clusterLW) IsWatchListSemanticsUnSupported() bool { return true }

func (l *clusterLW) List(metav1.ListOptions) (runtime.Object, error) {
	l.mu.Lock()
	gate := l.gate
	l.mu.Unlock()
	if gate != nil {
		<-gate
	}
	l.c.mu.Lock()
	r := l.c.rev
	l.c.mu.Unlock()
	objs := l.c.objects(rolebindings, r)
	keys := make([]string, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	list := &rbacv1.RoleBindingList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(r, 10)}}
	for _, k := range keys {
		list.Items = append(list.Items, *objs[k].DeepCopyObject().(*rbacv1.RoleBinding))
	}
	return list, nil
}

func (l *clusterLW) Watch(o metav1.ListOptions) (watch.Interface, error) {
	from, _ := strconv.ParseUint(o.ResourceVersion, 10, 64)
	w := watch.NewFakeWithChanSize(1000, false)
	l.c.mu.Lock()
	for _, ch := range l.c.log {
		if ch.key == rolebindings && ch.rev > from {
			w.Action(changeType(ch), ch.obj.DeepCopyObject())
		}
	}
	l.c.mu.Unlock()
	l.mu.Lock()
	l.w = w
	l.mu.Unlock()
	return w, nil
}

func changeType(ch fakeChange) watch.EventType {
	if ch.deleted {
		return watch.Deleted
	}
	return watch.Modified
}

// write writes to the cluster and sends the write to the open watch.
func (l *clusterLW) write(obj runtime.Object, deleted bool) {
	ch := l.c.write(rolebindings, obj, deleted)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil && !l.w.IsStopped() {
		l.w.Action(changeType(ch), ch.obj.DeepCopyObject())
	}
}

// expire ends the watch with 410 Gone and holds the relist's list until
// the returned func is called. It waits for the informer's watch to open
// first: expired before it, the writes after would reach the informer as
// that watch's replay, in their own order, and no relist would happen.
func (l *clusterLW) expire(t testing.TB) (release func()) {
	t.Helper()
	testwait.For(t, "the informer's watch to open", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.w != nil && !l.w.IsStopped()
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	gate := make(chan struct{})
	l.gate = gate
	if l.w != nil {
		l.w.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
		l.w.Stop()
		l.w = nil
	}
	return func() {
		l.mu.Lock()
		l.gate = nil
		l.mu.Unlock()
		close(gate)
	}
}

// trackedReplica is a replica whose RoleBindings come through a real
// client-go informer and a sourcefeed.Tracker over lw; its namespaces are fed
// directly.
func trackedReplica(t *testing.T, c *fakeCluster, lw *clusterLW) *watchmux.Mux {
	t.Helper()
	m := c.replica()
	c.mu.Lock()
	r := c.rev
	c.mu.Unlock()
	for _, o := range c.objects("namespaces", r) {
		m.OnNamespace(o, false)
	}
	tr := sourcefeed.New(rolebindings, lw)
	inf := cache.NewSharedIndexInformer(tr.ListerWatcher(), &rbacv1.RoleBinding{}, 0, cache.Indexers{})
	reg, err := m.AddSource(rolebindings, watchmux.Source{Informer: inf, Stream: tr, List: c.lister(rolebindings)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go inf.RunWithContext(ctx)
	testwait.For(t, "the informer to sync", reg.HasSynced)
	// The reflector opens its watch after the list: a write made before
	// then reaches the informer through the watch's replay, not when a
	// test delivers it (a lagging watch, deliver).
	testwait.For(t, "the informer's watch to open", lw.watching)
	m.MarkSynced()
	return m
}

// watching reports whether the informer's watch is open.
func (l *clusterLW) watching() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w != nil && !l.w.IsStopped()
}

// TestResumeAfterRelist is issue 38's cases 2 and 3: replica A's informer
// relists after missing writes, and client-go hands it the list's changes
// in key order (a@r+1 before b@r), deletions first. A client cut off after
// the first event of the relist resumes on replica B from that event's
// version, and must get the rest: a version names the state the client
// holds, never "the highest revision delivered so far".
func TestResumeAfterRelist(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		writes func(lw *clusterLW)
		// first is the event the client is cut off after; rest, what
		// the resume must send.
		first, rest []string
	}{{
		name: "a missed edit (case 2)",
		writes: func(lw *clusterLW) {
			lw.write(roleBinding("team-x", "b", edited), false)
			lw.write(roleBinding("team-x", "a", edited), false)
		},
		first: []string{"MODIFIED team-x/a local@team-x"},
		rest:  []string{"MODIFIED team-x/b local@team-x"},
	}, {
		name: "a deletion inferred by the relist (case 3)",
		writes: func(lw *clusterLW) {
			lw.write(roleBinding("team-x", "b"), true)
			lw.write(roleBinding("team-x", "a", edited), false)
		},
		first: []string{"MODIFIED team-x/a local@team-x"},
		rest:  []string{"DELETED team-x/b local@team-x"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &fakeCluster{}
			c.write("namespaces", namespace(global), false)
			c.write("namespaces", namespace("team-x"), false)
			c.write(rolebindings, roleBinding("team-x", "a"), false)
			c.write(rolebindings, roleBinding("team-x", "b"), false)
			lw := &clusterLW{c: c}
			a := trackedReplica(t, c, lw)
			f := watchAndFollow(t, a, watchmux.WatchOptions{Namespace: "team-x", ResourceVersion: currentText(t, a)})

			release := lw.expire(t)
			tc.writes(lw)
			release()
			evs := f.waitFor(t, len(tc.first)+len(tc.rest))
			var got []string
			for _, ev := range evs[:len(tc.first)] {
				got = append(got, describeEvent(ev))
			}
			if !equalStrings(got, tc.first) {
				t.Fatalf("replica A's first events %v, want %v (all: %v)", got, tc.first, describeEvents(evs))
			}
			acc, err := meta.Accessor(evs[len(tc.first)-1].Object)
			if err != nil {
				t.Fatal(err)
			}
			cut := acc.GetResourceVersion()
			t.Logf("cut off at %s", cut)

			b := c.startReplica(rand.New(rand.NewPCG(1, 2)))
			g := watchAndFollow(t, b, watchmux.WatchOptions{Namespace: "team-x", ResourceVersion: cut})
			if got := describeEvents(g.waitFor(t, len(tc.rest))); !equalStrings(got, tc.rest) {
				t.Errorf("resumed on replica B: %v, want %v", got, tc.rest)
			}
		})
	}
}

// currentText is the version of a list of m's views.
func currentText(t *testing.T, m *watchmux.Mux) string {
	t.Helper()
	_, version := testfixture.Views(t, m, rolebindings)
	return version
}

// edited changes a source object's content.
func edited(m *metav1.ObjectMeta) { m.Annotations["test.implicit.dev/edit"] = "2" }

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// currentVersion is m's current version.
func currentVersion(t *testing.T, m *watchmux.Mux) string {
	t.Helper()
	v, err := m.Read(func(watchmux.Reader) {})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestQuietVersionServedWithoutListing is issue 38's case 1: a version
// names the current state by revisions etcd has since compacted (nothing
// changed since). A replica started later serves it with no list, so the
// compaction doesn't matter: a bookmark and no events, not 410.
func TestQuietVersionServedWithoutListing(t *testing.T) {
	t.Parallel()
	c := &fakeCluster{}
	c.write("namespaces", namespace(global), false)
	c.write("namespaces", namespace("team-x"), false)
	c.write(rolebindings, roleBinding(global, "a"), false)
	rng := rand.New(rand.NewPCG(3, 8))
	a := c.startReplica(rng)
	v := currentVersion(t, a)
	// Another kind moves etcd on, and everything before is compacted.
	c.write("roles", role("team-x", "r"), false)
	c.mu.Lock()
	c.compacted = c.rev
	c.mu.Unlock()
	b := c.startReplica(rng)
	for _, ns := range []string{"", "team-x"} {
		ev := firstEvent(t, b, watchmux.WatchOptions{Resource: rolebindings, Namespace: ns, ResourceVersion: v, AllowBookmarks: true}, "resume on B from "+v)
		if ev.Type != watch.Bookmark {
			t.Errorf("namespace %q: first event %s, want a bookmark (the client holds the current views)", ns, describeEvent(ev))
		}
	}
	if _, err := b.ResultsAt(context.Background(), v, rolebindings, "team-x", ""); err != nil {
		t.Errorf("an exact list at %s on B: %v", v, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.lists) != 0 {
		t.Errorf("B listed %v, want nothing", c.lists)
	}
}

// TestPastViewOfAnotherNamespace is issue 38's case 8: a version that
// names a namespace since deleted and created again (another uid) is not
// served for it, and building past states waits for the requester's turn.
func TestPastViewOfAnotherNamespace(t *testing.T) {
	t.Parallel()
	c := &fakeCluster{}
	c.write("namespaces", namespace(global), false)
	c.write("namespaces", namespace("org"), false)
	c.write("namespaces", namespace("team-x", parent("org")), false)
	c.write(rolebindings, roleBinding("org", "secret"), false)
	rng := rand.New(rand.NewPCG(4, 9))
	v := currentVersion(t, c.startReplica(rng))
	c.write("namespaces", namespace("team-x", parent("org")), true)
	again := namespace("team-x")
	again.UID = "another-uid"
	c.write("namespaces", again, false)
	b := c.startReplica(rng)
	_, err := b.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings, Namespace: "team-x", ResourceVersion: v})
	if !apierrors.IsResourceExpired(err) {
		t.Errorf("a watch of the new team-x from %s: %v, want 410 Gone", v, err)
	}
	if _, err := b.ResultsAt(context.Background(), v, rolebindings, "team-x", ""); !apierrors.IsResourceExpired(err) {
		t.Errorf("an exact list of the new team-x at %s: %v, want 410 Gone", v, err)
	}

	refusing := newMux(watchmux.Options{PastStates: func(context.Context) error { return errors.New("not your turn") }})
	refusing.SetNamespaceList(c.lister("namespaces"))
	refusing.SetSourceList(rolebindings, "", c.lister(rolebindings))
	c.mu.Lock()
	r := c.rev
	c.mu.Unlock()
	for _, key := range []string{"namespaces", rolebindings} {
		for _, o := range c.objects(key, r) {
			feedChange(refusing, fakeChange{key: key, obj: o})
		}
	}
	refusing.MarkSynced()
	refusing.Progress("namespaces", r)
	refusing.Progress(rolebindings, r)
	if _, err := refusing.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings, Namespace: "org", ResourceVersion: v}); !apierrors.IsTooManyRequests(err) {
		t.Errorf("a past view without the requester's turn: %v, want 429", err)
	}
}

// firstEvent is firstEventOrErr for a watch that must start.
func firstEvent(t *testing.T, m *watchmux.Mux, opts watchmux.WatchOptions, what string) watch.Event {
	t.Helper()
	ev, err := firstEventOrErr(t, m, opts, what)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return ev
}
