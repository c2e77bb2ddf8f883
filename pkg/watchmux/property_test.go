package watchmux_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// TestEventsFollowViews applies random changes to a mux and checks that
// every watcher, folding its events into a map, ends with exactly the views
// Read computes, through events that each make sense on their own: no
// DELETED or MODIFIED of an item the watcher doesn't hold, no ADDED of one
// it holds, no MODIFIED that changes nothing a view item shows.
func TestEventsFollowViews(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3, 4, 5, 6} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			t.Parallel()
			checkEventsFollowViews(t, seed, 400)
		})
	}
}

// oracleEvery is how often, in steps, the views are checked against the
// merge oracle (checkOracle) on the way.
const oracleEvery = 5

// world is the random test's universe: a few namespaces, among them the
// global one and an excluded one, and a few item names, so changes collide.
type world struct {
	rng *rand.Rand
	// namespaces that may exist; parents may also name ghost, which never does.
	namespaces []string
	items      []string
	// candidateNames are the names candidates take: their own (c0, c1) or
	// a stable name's (r5, a candidate named like a source).
	candidateNames []string
	// sources holds the last object put of each namespace/name.
	sources map[string]*rbacv1.RoleBinding
	// nsObjs holds the existing namespaces, as last put.
	nsObjs map[string]*corev1.Namespace
}

// stages are the values of implicit.dev/stage the test's namespaces take
// ("" for none).
var stages = []string{"", "", "canary", "early", "prod"}

// selectors are the canary selectors the test's candidates take: among
// them, negative ones (which select namespaces without a stage), and
// malformed ones, which reach no namespace (missing is the annotation left
// out).
var selectors = []string{
	v1alpha1.LabelStage + "=canary", v1alpha1.LabelStage + " in (canary,early)", "!" + v1alpha1.LabelStage,
	v1alpha1.LabelStage + " notin (prod)", "team=a", "", "missing",
}

// stage labels a namespace with stage ("": none).
func stage(stage string) nsOpt {
	return func(ns *corev1.Namespace) {
		if stage != "" {
			ns.Labels[v1alpha1.LabelStage] = stage
		}
	}
}

// candidateFor makes a source a candidate for forName (missing: no
// candidate-for annotation) with selector (missing: none).
func candidateFor(forName, selector string) objOpt {
	return func(m *metav1.ObjectMeta) {
		if forName != "missing" {
			m.Annotations[v1alpha1.AnnotationCandidateFor] = forName
		}
		if selector != "missing" {
			m.Annotations[v1alpha1.AnnotationCanarySelector] = selector
		}
	}
}

func newWorld(seed uint64) *world {
	return &world{
		rng:        rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		namespaces: []string{global, "kube-system", "n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"},
		items:      []string{"r0", "r1", "r2", "r3", "r4", "r5"},
		sources:    map[string]*rbacv1.RoleBinding{},
		nsObjs:     map[string]*corev1.Namespace{},

		candidateNames: []string{"c0", "c1", "r5"},
	}
}

func (w *world) pick(from []string) string { return from[w.rng.IntN(len(from))] }

// tenantName is one of n0..n7.
func (w *world) tenantName() string { return w.pick(w.namespaces[2:]) }

// step makes one random change and describes it.
func (w *world) step(m *watchmux.Mux) string {
	lock := func(p float64) []objOpt {
		if w.rng.Float64() < p {
			return []objOpt{locked}
		}
		return nil
	}
	putSource := func(ns string, opts []objOpt) string {
		rb := roleBinding(ns, w.pick(w.items), opts...)
		w.sources[ns+"/"+rb.Name] = rb
		m.OnSource(rolebindings, rb, false)
		return fmt.Sprintf("put %s/%s locked=%v", ns, rb.Name, len(opts) > 0)
	}
	putCandidate := func(ns string) string {
		name := w.pick(w.candidateNames)
		forName := w.pick(w.items[:4])
		switch w.rng.IntN(12) {
		case 0:
			forName = "missing"
		case 1:
			forName = name // its own name: malformed
		case 2:
			forName = "r5" // a stable name that is also a candidate's
		}
		sel := w.pick(selectors)
		opts := []objOpt{candidateFor(forName, sel)}
		if w.rng.IntN(5) == 0 {
			opts = append(opts, locked)
		}
		rb := roleBinding(ns, name, opts...)
		w.sources[ns+"/"+rb.Name] = rb
		m.OnSource(rolebindings, rb, false)
		return fmt.Sprintf("put candidate %s/%s for %q selector %q locked=%v", ns, name, forName, sel, len(opts) > 1)
	}
	delSource := func(ns string) string {
		name := w.pick(w.items)
		if w.rng.IntN(3) == 0 {
			name = w.pick(w.candidateNames)
		}
		delete(w.sources, ns+"/"+name)
		if w.rng.IntN(4) == 0 {
			m.OnSource(rolebindings, cache.DeletedFinalStateUnknown{Key: ns + "/" + name, Obj: roleBinding(ns, name)}, false)
		} else {
			m.OnSource(rolebindings, roleBinding(ns, name), true)
		}
		return fmt.Sprintf("delete %s/%s", ns, name)
	}
	switch r := w.rng.IntN(110); {
	case r >= 100:
		return w.stageStep(m, putCandidate)
	case r < 22:
		return putSource(global, lock(0.3))
	case r < 30:
		return delSource(global)
	case r < 52:
		return putSource(w.tenantName(), lock(0.2))
	case r < 55:
		return putSource(w.pick(w.namespaces[:2]), nil) // the global's own view or a non-tenant's
	case r < 63:
		return delSource(w.pick(w.namespaces))
	case r < 88:
		name := w.pick(w.namespaces)
		if w.rng.IntN(3) == 0 {
			name = w.tenantName()
		}
		var opts []nsOpt
		switch p := w.rng.IntN(10); {
		case p < 5:
			opts = append(opts, parent(w.tenantName()))
		case p == 5:
			opts = append(opts, parent(w.pick([]string{"ghost", global, "kube-system", name})))
		}
		if w.rng.IntN(3) == 0 {
			opts = append(opts, exclude(w.pick([]string{
				"rolebindings/r0", "rolebindings/r1, rolebindings/r2", "rolebindings/*", "roles/*",
				"rolebindings/r3,bad entry", " rolebindings / r4 ",
			})))
		}
		if w.rng.IntN(12) == 0 {
			opts = append(opts, noInherit)
		}
		opts = append(opts, stage(w.pick(stages)))
		ns := namespace(name, opts...)
		w.nsObjs[name] = ns
		m.OnNamespace(ns, false)
		return fmt.Sprintf("namespace %s labels %v annotations %v", name, ns.Labels, ns.Annotations)
	case r < 95:
		name := w.pick(w.namespaces)
		delete(w.nsObjs, name)
		if w.rng.IntN(4) == 0 {
			m.OnNamespace(cache.DeletedFinalStateUnknown{Key: name, Obj: namespace(name)}, false)
		} else {
			m.OnNamespace(namespace(name), true)
		}
		return "delete namespace " + name
	default:
		// An object delivered again, unchanged: nothing happens.
		keys := slices.Sorted(maps.Keys(w.sources))
		if len(keys) == 0 {
			return "nothing"
		}
		rb := w.sources[w.pick(keys)]
		m.OnSource(rolebindings, rb, false)
		return "again " + rb.Namespace + "/" + rb.Name
	}
}

// stageStep puts a candidate (in the global namespace, a tenant or a
// non-tenant), or changes the stage label of an existing namespace alone.
func (w *world) stageStep(m *watchmux.Mux, putCandidate func(ns string) string) string {
	switch r := w.rng.IntN(10); {
	case r < 3:
		return putCandidate(global)
	case r < 5:
		return putCandidate(w.tenantName())
	case r < 6:
		return putCandidate(w.pick(w.namespaces[:2]))
	}
	names := slices.Sorted(maps.Keys(w.nsObjs))
	if len(names) == 0 {
		return "nothing"
	}
	old := w.nsObjs[w.pick(names)]
	ns := old.DeepCopy()
	delete(ns.Labels, v1alpha1.LabelStage)
	stage(w.pick(stages))(ns)
	w.nsObjs[ns.Name] = ns
	m.OnNamespace(ns, false)
	return fmt.Sprintf("namespace %s stage %q", ns.Name, ns.Labels[v1alpha1.LabelStage])
}

// checkOracle checks every view of m against the merge of what w put
// (merge.Levels, which stages the levels for the viewer, and MergeWith),
// and every item of every view against its merge alone (the per-name
// path the events are computed with, which passes a name's candidates).
func (w *world) checkOracle(t *testing.T, m *watchmux.Mux) {
	t.Helper()
	items := map[string][]merge.Item{}
	for _, key := range slices.Sorted(maps.Keys(w.sources)) {
		rb := w.sources[key]
		c, _ := merge.ParseCandidate(rb.Name, rb.Annotations)
		items[rb.Namespace] = append(items[rb.Namespace], merge.Item{
			Namespace: rb.Namespace, Name: rb.Name, Locked: merge.IsLocked(rb.Annotations),
			Overlay: merge.WantsOverlay(rb.Annotations), Object: rb, UID: rb.UID, Candidate: c,
		})
	}
	lookup := func(name string) (*merge.Namespace, bool) {
		ns, ok := w.nsObjs[name]
		if !ok {
			return nil, false
		}
		return &merge.Namespace{Name: ns.Name, UID: ns.UID, Labels: ns.Labels, Annotations: ns.Annotations}, true
	}
	names := append(slices.Clone(w.items), w.candidateNames...)
	_, err := m.Read(func(r watchmux.Reader) {
		for _, ns := range w.namespaces {
			l := merge.Resolve(policy(), ns, lookup)
			want := merge.MergeWith(rolebindings, merge.Levels(l, global, func(n string) []merge.Item { return items[n] }), merge.Options{})
			got := r.Results(rolebindings, ns, "")
			if g, w := renderResults(got), renderResults(want); g != w {
				t.Errorf("view of %s:\n got %s\nwant %s", ns, g, w)
			}
			for _, name := range names {
				var one []merge.Result
				for _, res := range got {
					if res.Item.Name == name {
						one = append(one, res)
					}
				}
				if g, w := renderResults(r.Results(rolebindings, ns, name)), renderResults(one); g != w {
					t.Errorf("item %s of %s's view merged alone:\n got %s\nwant %s", name, ns, g, w)
				}
			}
		}
	})
	if err != nil {
		t.Fatalf("reading the mux: %v", err)
	}
}

// renderResults renders merge results with everything a view item is made
// of, the source object by identity.
func renderResults(rs []merge.Result) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "[%s %s/%s %p uid=%s from=%q locked=%v conflicts=%q overlays=%q] ",
			r.Item.Name, r.Item.Namespace, r.Scope, r.Item.Object, r.Item.UID, r.Item.FromCandidate, r.Item.Locked, r.Conflicts, r.OverlaySources())
	}
	return b.String()
}

// tracked is a watcher under test: what it held when it started, from
// which version, and what it received.
type tracked struct {
	name      string
	namespace string // "" for all
	f         *follower
	start     uint64
	// state is what the watcher holds at start: the views at start when it
	// resumes from a version, nothing when it gets the items as events.
	state map[string]string
	// initial is the number of initial ADDED events; end says an
	// initial-events-end bookmark follows them.
	initial int
	end     bool
}

func checkEventsFollowViews(t *testing.T, seed uint64, steps int) {
	w := newWorld(seed)
	m := newMux(watchmux.Options{BufferSize: 10_000})
	var log []string
	for range 60 {
		log = append(log, w.step(m))
	}
	m.MarkSynced()
	defer func() {
		if t.Failed() {
			t.Logf("steps of seed %d:\n%s", seed, strings.Join(log, "\n"))
		}
	}()

	var watchers []*tracked
	start := func(name, namespace, rv string, sendInitial *bool) {
		views, cur := readViews(t, m, rolebindings)
		tr := &tracked{name: name, namespace: namespace, start: cur, state: map[string]string{}}
		in := inNamespace(views, namespace)
		switch {
		case sendInitial != nil && *sendInitial:
			tr.initial, tr.end = len(in), true
		case rv == "" || rv == "0":
			tr.initial = len(in)
		default:
			tr.state = in
		}
		tr.f = watchAndFollow(t, m, watchmux.WatchOptions{Namespace: namespace, ResourceVersion: rv, SendInitialEvents: sendInitial, AllowBookmarks: true})
		watchers = append(watchers, tr)
	}
	rv0 := rvText(currentRV(t, m))
	start("all, resumed", "", rv0, nil)
	start("all, initial items", "", "", nil)
	start("global namespace", global, rv0, nil)
	start("kube-system", "kube-system", rv0, nil)
	start("n0", "n0", rv0, nil)
	start("n1", "n1", "0", nil)
	start("n2, watch-list", "n2", "", ptr.To(true))
	start("ghost", "ghost", rv0, nil)

	for i := range steps {
		log = append(log, w.step(m))
		if i%oracleEvery == 0 {
			w.checkOracle(t, m)
		}
		if i == steps/2 {
			rv := rvText(currentRV(t, m))
			start("all, resumed halfway", "", rv, nil)
			start("n3, resumed halfway", "n3", rv, nil)
			start("n4, initial items halfway", "n4", "", nil)
		}
	}
	w.checkOracle(t, m)
	final, end := readViews(t, m, rolebindings)
	t.Logf("seed %d: %d steps, %d view events, %d items in the final views", seed, 60+steps, end-parseRV(t, rv0), len(final))

	// The all-namespaces watchers see every event: versions are consecutive.
	all := watchers[0]
	perNS := map[string][]watch.Event{}
	for _, ev := range all.f.waitFor(t, int(end-all.start)) {
		acc, _ := meta.Accessor(ev.Object)
		perNS[acc.GetNamespace()] = append(perNS[acc.GetNamespace()], ev)
	}
	for _, tr := range watchers {
		t.Run(tr.name, func(t *testing.T) {
			want := inNamespace(final, tr.namespace)
			n := tr.initial
			if tr.end {
				n++
			}
			if tr.namespace == "" {
				n += int(end - tr.start)
			} else {
				for _, ev := range perNS[tr.namespace] {
					if rvOf(t, ev) > tr.start {
						n++
					}
				}
			}
			got := tr.f.waitFor(t, n)
			live := fold(t, tr, got)
			if !maps.Equal(tr.state, want) {
				for _, k := range slices.Sorted(maps.Keys(want)) {
					if tr.state[k] != want[k] {
						t.Errorf("%s: watcher holds %q, view has %q", k, tr.state[k], want[k])
					}
				}
				for _, k := range slices.Sorted(maps.Keys(tr.state)) {
					if _, ok := want[k]; !ok {
						t.Errorf("%s: watcher holds %q, not in the view", k, tr.state[k])
					}
				}
			}
			// A namespace's watcher sees the same live events as the
			// all-namespaces watcher, in the same order.
			if tr.namespace != "" {
				var fromMain []string
				for _, ev := range perNS[tr.namespace] {
					if rvOf(t, ev) > tr.start {
						fromMain = append(fromMain, eventKey(t, ev))
					}
				}
				if !slices.Equal(live, fromMain) {
					t.Errorf("live events differ from the all-namespaces watcher's:\n got %q\nwant %q", live, fromMain)
				}
			}
		})
	}
}

// fold applies tr's events to tr.state, checking each, and returns its live
// events, rendered with eventKey.
func fold(t *testing.T, tr *tracked, got []watch.Event) []string {
	t.Helper()
	var live []string
	var prev uint64
	for i, ev := range got {
		rv := rvOf(t, ev)
		switch {
		case i < tr.initial:
			if ev.Type != watch.Added || rv != tr.start {
				t.Errorf("initial event %d: %s at %d, want ADDED at %d", i, describeEvent(ev), rv, tr.start)
			}
		case tr.end && i == tr.initial:
			acc, _ := meta.Accessor(ev.Object)
			if ev.Type != watch.Bookmark || rv != tr.start || acc.GetAnnotations()["k8s.io/initial-events-end"] != "true" {
				t.Errorf("event %d: %s at %d, want the initial-events-end BOOKMARK at %d", i, ev.Type, rv, tr.start)
			}
			continue
		default:
			if rv <= prev || rv <= tr.start {
				t.Errorf("event %d (%s) at %d, after %d, from a start at %d", i, describeEvent(ev), rv, prev, tr.start)
			}
			if ev.Type == watch.Bookmark {
				t.Errorf("event %d: unexpected BOOKMARK (the clock never ticks)", i)
				continue
			}
			live = append(live, eventKey(t, ev))
		}
		prev = rv
		acc, _ := meta.Accessor(ev.Object)
		if tr.namespace != "" && acc.GetNamespace() != tr.namespace {
			t.Errorf("event %d: %s in a watch of %s", i, describeEvent(ev), tr.namespace)
		}
		key := acc.GetNamespace() + "/" + acc.GetName()
		item := describeFull(ev.Object)
		held, ok := tr.state[key]
		switch ev.Type {
		case watch.Added:
			if ok {
				t.Errorf("event %d: ADDED %s, already held as %q", i, item, held)
			}
			tr.state[key] = item
		case watch.Modified:
			switch {
			case !ok:
				t.Errorf("event %d: MODIFIED %s, not held", i, item)
			case held == item:
				t.Errorf("event %d: MODIFIED %s changes nothing", i, item)
			}
			tr.state[key] = item
		case watch.Deleted:
			switch {
			case !ok:
				t.Errorf("event %d: DELETED %s, not held", i, item)
			case held != item:
				t.Errorf("event %d: DELETED %s, held as %q", i, item, held)
			}
			delete(tr.state, key)
		default:
			t.Errorf("event %d: unexpected %s", i, ev.Type)
		}
	}
	return live
}

// eventKey renders an event with its version, to compare streams.
func eventKey(t *testing.T, ev watch.Event) string {
	return fmt.Sprintf("%d %s %s", rvOf(t, ev), ev.Type, describeFull(ev.Object))
}

// inNamespace returns the items of views in namespace, or all for "".
func inNamespace(views map[string]string, namespace string) map[string]string {
	out := map[string]string{}
	for k, v := range views {
		if namespace == "" || strings.HasPrefix(k, namespace+"/") {
			out[k] = v
		}
	}
	return out
}
