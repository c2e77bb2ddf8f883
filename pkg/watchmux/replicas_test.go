package watchmux_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// fakeCluster is kube-apiserver over one etcd: every write gets the next
// revision, and each kind lists as of any revision since the compaction
// (resourceVersionMatch=Exact).
type fakeCluster struct {
	mu        sync.Mutex
	rev       uint64
	compacted uint64
	log       []fakeChange
	// lists records the exact lists asked for.
	lists []listCall
}

// listCall is one exact list: of key, at revision rev, in namespace ("":
// all), and how many objects it returned.
type listCall struct {
	key       string
	rev       uint64
	namespace string
	objects   int
}

// fakeChange is one write, as the kind's watch delivers it.
type fakeChange struct {
	rev     uint64
	key     string // "namespaces" or a resource
	obj     runtime.Object
	deleted bool
}

func (c *fakeCluster) write(key string, obj runtime.Object, deleted bool) fakeChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rev++
	obj = obj.DeepCopyObject()
	acc, _ := meta.Accessor(obj)
	acc.SetResourceVersion(strconv.FormatUint(c.rev, 10))
	ch := fakeChange{rev: c.rev, key: key, obj: obj, deleted: deleted}
	c.log = append(c.log, ch)
	return ch
}

// objects returns key's objects as of revision r, by namespace/name.
func (c *fakeCluster) objects(key string, r uint64) map[string]runtime.Object {
	c.mu.Lock()
	defer c.mu.Unlock()
	objs := map[string]runtime.Object{}
	for _, ch := range c.log {
		if ch.rev > r {
			break
		}
		if ch.key != key {
			continue
		}
		acc, _ := meta.Accessor(ch.obj)
		k := acc.GetNamespace() + "/" + acc.GetName()
		if ch.deleted {
			delete(objs, k)
		} else {
			objs[k] = ch.obj
		}
	}
	return objs
}

func (c *fakeCluster) lister(key string) watchmux.ListFunc {
	return func(_ context.Context, rv, namespace string) ([]runtime.Object, error) {
		r, err := strconv.ParseUint(rv, 10, 64)
		if err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
		c.mu.Lock()
		compacted, cur := c.compacted, c.rev
		c.mu.Unlock()
		if r < compacted {
			return nil, apierrors.NewResourceExpired("The resourceVersion for the provided list is too old.")
		}
		if r > cur {
			return nil, apierrors.NewTimeoutError("Too large resource version", 1)
		}
		// Copies, as a real list decodes new objects.
		var out []runtime.Object
		for _, o := range c.objects(key, r) {
			if acc, _ := meta.Accessor(o); namespace == "" || key == "namespaces" || acc.GetNamespace() == namespace {
				out = append(out, o.DeepCopyObject())
			}
		}
		c.mu.Lock()
		c.lists = append(c.lists, listCall{key: key, rev: r, namespace: namespace, objects: len(out)})
		c.mu.Unlock()
		return out, nil
	}
}

// replica is a mux fed from the fake cluster, with its exact listers.
func (c *fakeCluster) replica() *watchmux.Mux {
	m := newMux(watchmux.Options{})
	m.SetNamespaceList(c.lister("namespaces"))
	m.SetSourceList(rolebindings, "", c.lister(rolebindings))
	return m
}

// startReplica starts a replica as after a restart: its informers list the
// current objects, in no particular order, and it syncs.
func (c *fakeCluster) startReplica(rng *rand.Rand) *watchmux.Mux {
	m := c.replica()
	c.mu.Lock()
	r := c.rev
	c.mu.Unlock()
	var all []fakeChange
	for _, key := range []string{"namespaces", rolebindings} {
		for _, o := range c.objects(key, r) {
			all = append(all, fakeChange{key: key, obj: o})
		}
	}
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	for _, ch := range all {
		feedChange(m, ch)
	}
	m.MarkSynced()
	// Its informers listed at r: through a Tracker, every source's state
	// is complete there, whatever its newest object's revision.
	m.Progress("namespaces", r)
	m.Progress(rolebindings, r)
	return m
}

func feedChange(m *watchmux.Mux, ch fakeChange) {
	if ch.key == "namespaces" {
		m.OnNamespace(ch.obj, ch.deleted)
	} else {
		m.OnSource(ch.key, ch.obj, ch.deleted)
	}
}

// interleave returns changes in another order that keeps each kind's own
// order, as two replicas' informers may deliver them.
func interleave(rng *rand.Rand, changes []fakeChange) []fakeChange {
	queues := map[string][]fakeChange{}
	var keys []string
	for _, ch := range changes {
		if _, ok := queues[ch.key]; !ok {
			keys = append(keys, ch.key)
		}
		queues[ch.key] = append(queues[ch.key], ch)
	}
	var out []fakeChange
	for len(out) < len(changes) {
		k := keys[rng.IntN(len(keys))]
		// Runs of a few changes of one kind, so one informer is often
		// ahead of the other.
		for n := 1 + rng.IntN(4); n > 0 && len(queues[k]) > 0; n-- {
			out = append(out, queues[k][0])
			queues[k] = queues[k][1:]
		}
	}
	return out
}

// viewState is a client's copy of a view: namespace/name -> the item
// without its resourceVersion.
type viewState map[string]string

func itemKey(t *testing.T, obj runtime.Object) (string, string) {
	t.Helper()
	obj = obj.DeepCopyObject()
	acc, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	acc.SetResourceVersion("")
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return acc.GetNamespace() + "/" + acc.GetName(), string(b)
}

// apply applies ev as a client would, failing on an event a client at s
// could not have been sent: an ADDED of an item it holds, a MODIFIED or
// DELETED of one it does not.
func (s viewState) apply(t *testing.T, ev watch.Event, what string) {
	t.Helper()
	k, v := itemKey(t, ev.Object)
	_, has := s[k]
	switch ev.Type {
	case watch.Added:
		if has {
			t.Errorf("%s: ADDED %s, which the client holds", what, k)
		}
		s[k] = v
	case watch.Modified:
		if !has {
			t.Errorf("%s: MODIFIED %s, which the client does not hold", what, k)
		}
		s[k] = v
	case watch.Deleted:
		if !has {
			t.Errorf("%s: DELETED %s, which the client does not hold", what, k)
		}
		delete(s, k)
	}
}

func (s viewState) clone() viewState {
	out := viewState{}
	for k, v := range s {
		out[k] = v
	}
	return out
}

func (s viewState) in(namespace string) viewState {
	out := viewState{}
	for k, v := range s {
		if k[:len(namespace)+1] == namespace+"/" {
			out[k] = v
		}
	}
	return out
}

func (s viewState) diff(other viewState) []string {
	var out []string
	for k, v := range s {
		if w, ok := other[k]; !ok {
			out = append(out, "only the client holds "+k)
		} else if w != v {
			out = append(out, "the client's "+k+" differs: "+v+" / "+w)
		}
	}
	for k := range other {
		if _, ok := s[k]; !ok {
			out = append(out, "the client lacks "+k)
		}
	}
	sort.Strings(out)
	return out
}

// readUntilBookmark reads w's events up to the first bookmark.
func readUntilBookmark(t *testing.T, w watch.Interface) []watch.Event {
	t.Helper()
	var out []watch.Event
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch closed before its bookmark")
			}
			if ev.Type == watch.Bookmark {
				return out
			}
			out = append(out, ev)
		case <-timeout:
			t.Fatal("no bookmark within 30s")
		}
	}
}

// currentView is m's view of rolebindings in namespace ("" for all), as a
// watch-list sends it.
func currentView(t *testing.T, m *watchmux.Mux, namespace string) viewState {
	t.Helper()
	yes := true
	w, err := m.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings, Namespace: namespace, SendInitialEvents: &yes, AllowBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	s := viewState{}
	for _, ev := range readUntilBookmark(t, w) {
		s.apply(t, ev, "current view")
	}
	return s
}

// writer makes random writes: RoleBindings created, edited, deleted in the
// global namespace and in tenants; tenants re-parented, deleted, created.
type writer struct {
	c    *fakeCluster
	rng  *rand.Rand
	nss  map[string]*corev1.Namespace
	rbs  map[string]*rbacv1.RoleBinding
	seqN int
}

var replicaTeams = []string{"team-a", "team-b", "team-c", "team-d", "team-e", "team-f"}

func newWriter(c *fakeCluster, rng *rand.Rand) *writer {
	return &writer{c: c, rng: rng, nss: map[string]*corev1.Namespace{}, rbs: map[string]*rbacv1.RoleBinding{}}
}

func (w *writer) namespace(name string) fakeChange {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name + "-" + strconv.Itoa(w.seqN))}}
	if old, ok := w.nss[name]; ok {
		ns = old.DeepCopy()
	}
	w.seqN++
	ns.Labels = map[string]string{}
	if name != global && w.rng.IntN(2) == 0 {
		ns.Labels[v1alpha1.LabelParent] = replicaTeams[w.rng.IntN(len(replicaTeams))]
	}
	w.nss[name] = ns
	return w.c.write("namespaces", ns, false)
}

func (w *writer) step() fakeChange {
	w.seqN++
	switch n := w.rng.IntN(20); {
	case n < 3: // re-parent a tenant
		return w.namespace(replicaTeams[w.rng.IntN(len(replicaTeams))])
	case n < 4: // delete a tenant, or create it again
		name := replicaTeams[w.rng.IntN(len(replicaTeams))]
		if ns, ok := w.nss[name]; ok {
			delete(w.nss, name)
			return w.c.write("namespaces", ns, true)
		}
		return w.namespace(name)
	case n < 7 && len(w.rbs) > 0: // delete a RoleBinding
		keys := make([]string, 0, len(w.rbs))
		for k := range w.rbs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		k := keys[w.rng.IntN(len(keys))]
		rb := w.rbs[k]
		delete(w.rbs, k)
		return w.c.write(rolebindings, rb, true)
	default: // create or edit one
		ns := global
		if w.rng.IntN(3) > 0 {
			ns = replicaTeams[w.rng.IntN(len(replicaTeams))]
		}
		name := fmt.Sprintf("rb-%d", w.rng.IntN(4))
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(fmt.Sprintf("uid-%s-%s", ns, name))},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: fmt.Sprintf("user-%d", w.seqN)}},
		}
		if old, ok := w.rbs[ns+"/"+name]; ok {
			rb.UID = old.UID
		}
		w.rbs[ns+"/"+name] = rb
		return w.c.write(rolebindings, rb, false)
	}
}

// clientEvent is an event a client of replica A received, with the state
// it held after it.
type clientEvent struct {
	version string
	ns      string
	state   viewState
}

// TestResumeOnAnyReplica is the replicas' contract: a watch from any
// version replica A issued (after any of its events, inside a change's
// events too) is served by replica B, which applied the same writes in
// another order, and by replica C, started after them: the client receives
// exactly the events from its state to the current view (no ADDED of an
// item it holds, no MODIFIED or DELETED of one it lacks) and ends with the
// current view. Clients of every namespace and of one namespace.
func TestResumeOnAnyReplica(t *testing.T) {
	t.Parallel()
	for seed := range uint64(3) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 31))
			f := followClient(t, rng, 60)
			c, b, want, events := f.c, f.b, f.want, f.events
			if d := currentView(t, b, "").diff(want); len(d) > 0 {
				t.Fatalf("replicas A and B at the same writes serve different views: %v", d)
			}
			cr := c.startReplica(rng) // started after every write

			for i, e := range events {
				if i%3 != 0 && i != len(events)-1 {
					continue // a third of them: each resume lists the sources
				}
				for name, m := range map[string]*watchmux.Mux{"B": b, "C (restarted)": cr} {
					for _, scope := range []string{"", "team-c"} {
						what := fmt.Sprintf("event %d (%s) on %s, scope %q", i, e.version, name, scope)
						rw, err := m.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings, Namespace: scope, ResourceVersion: e.version, AllowBookmarks: true})
						if err != nil {
							t.Fatalf("%s: %v", what, err)
						}
						s := e.state.clone()
						if scope != "" {
							s = s.in(scope)
						}
						for _, ev := range readUntilBookmark(t, rw) {
							s.apply(t, ev, what)
						}
						rw.Stop()
						wantScope := want
						if scope != "" {
							wantScope = want.in(scope)
						}
						if d := s.diff(wantScope); len(d) > 0 {
							t.Errorf("%s: the client does not end with the view: %v", what, d)
						}
					}
				}
			}

			// Versions older than the compaction window: 410 Gone, so the
			// client relists.
			c.mu.Lock()
			c.compacted = c.rev
			c.mu.Unlock()
			_, err := cr.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings, ResourceVersion: events[0].version})
			if !apierrors.IsResourceExpired(err) {
				t.Errorf("a watch from a compacted version: err = %v, want 410 Gone", err)
			}
		})
	}
}

// followed is a client of every namespace of replica A that followed it
// through random writes (followClient).
type followed struct {
	c    *fakeCluster
	a, b *watchmux.Mux
	// want is A's view after the writes; events are the client's states
	// after each event it received.
	want   viewState
	events []clientEvent
}

// followClient writes the namespaces of replicaTeams and 8 random changes
// to a fake cluster, starts replicas A and B of it and a client of every
// namespace of A, which lists with a watch-list (the versions of its
// initial events name the state after all of them: a reflector holds none
// of them until the bookmark that ends them); then steps more random
// changes reach A, and B in another order, and the client follows A until
// it holds A's view.
func followClient(t *testing.T, rng *rand.Rand, steps int) followed {
	t.Helper()
	c := &fakeCluster{}
	wr := newWriter(c, rng)
	wr.namespace(global)
	for _, n := range replicaTeams {
		wr.namespace(n)
	}
	for range 8 {
		wr.step()
	}
	f := followed{c: c, a: c.startReplica(rng), b: c.startReplica(rng)}
	yes := true
	w, err := f.a.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings, SendInitialEvents: &yes, AllowBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	state := viewState{}
	for _, ev := range readUntilBookmark(t, w) {
		state.apply(t, ev, "A's initial events")
	}
	var writes []fakeChange
	for range steps {
		writes = append(writes, wr.step())
	}
	for _, ch := range writes {
		feedChange(f.a, ch)
	}
	for _, ch := range interleave(rng, writes) {
		feedChange(f.b, ch)
	}
	f.want = currentView(t, f.a, "")
	deadline := time.After(30 * time.Second)
	for len(state.diff(f.want)) > 0 || len(f.events) == 0 {
		select {
		case ev := <-w.ResultChan():
			state.apply(t, ev, "following A")
			acc, _ := meta.Accessor(ev.Object)
			f.events = append(f.events, clientEvent{version: acc.GetResourceVersion(), ns: acc.GetNamespace(), state: state.clone()})
		case <-deadline:
			t.Fatalf("the client of A never reached its view: %v", state.diff(f.want))
		}
	}
	return f
}
