package watchmux_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// created sets a namespace's creationTimestamp.
func created(t time.Time) nsOpt {
	return func(ns *corev1.Namespace) { ns.CreationTimestamp = metav1.NewTime(t) }
}

// uid sets a namespace's uid.
func uid(u string) nsOpt {
	return func(ns *corev1.Namespace) { ns.UID = types.UID(u) }
}

// runChange feeds setup to a new mux of policy p, syncs it, applies change
// and returns the view events change made, sorted.
func runChange(t *testing.T, p merge.Policy, setup, change []step) []string {
	t.Helper()
	m := watchmux.New(p, []string{rolebindings}, &objects{}, watchmux.Options{})
	for _, s := range setup {
		s(m)
	}
	m.MarkSynced()
	before := currentRV(t, m)
	f := watchAndFollow(t, m, watchmux.WatchOptions{ResourceVersion: rvText(before)})
	for _, s := range change {
		s(m)
	}
	return describeEvents(f.waitFor(t, int(currentRV(t, m)-before)))
}

// TestViewEventsParentIdentity checks the events of parent identity
// changes: a parent deleted and created again with a new uid is not
// inherited, whether the informer delivers the deletion or only the new
// object (a relist), and recording its new uid adopts it.
func TestViewEventsParentIdentity(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	orgV1 := namespace("org", uid("org-1"), created(t0))
	orgV2 := namespace("org", uid("org-2"), created(t0.Add(48*time.Hour)))
	team := namespace("team", parent("org"), parentUID("org-1"), created(t0.Add(time.Hour)))
	legacy := namespace("legacy", parent("org"), created(t0.Add(time.Hour))) // labelled before the webhook
	setup := []step{
		addNS(namespace(global)), addNS(orgV1), addNS(team), addNS(legacy),
		putRB(global, "g"), putRB("org", "p"),
	}
	tests := []struct {
		name   string
		setup  []step
		change []step
		want   []string
	}{
		{
			name:   "parent deleted: its items leave the children's views",
			setup:  setup,
			change: []step{delNS("org")},
			want:   []string{"DELETED legacy/p parent@org", "DELETED org/g global@implicit-global", "DELETED org/p local@org", "DELETED team/p parent@org"},
		},
		{
			name:   "parent created again with a new uid: not inherited, by recorded uid or by age",
			setup:  setup,
			change: []step{delNS("org"), addNS(orgV2), putRB("org", "q")},
			want: []string{
				"DELETED legacy/p parent@org", "DELETED org/g global@implicit-global", "DELETED org/p local@org", "DELETED team/p parent@org",
				"ADDED org/g global@implicit-global", "ADDED org/p local@org", "ADDED org/q local@org",
			},
		},
		{
			name:   "parent replaced without a deletion (informer relist): the same",
			setup:  setup,
			change: []step{addNS(orgV2)},
			want:   []string{"DELETED legacy/p parent@org", "DELETED team/p parent@org"},
		},
		{
			name:   "recording the new uid adopts the new parent",
			setup:  append(slices.Clone(setup), addNS(orgV2)),
			change: []step{addNS(namespace("team", parent("org"), parentUID("org-2"), created(t0.Add(time.Hour))))},
			want:   []string{"ADDED team/p parent@org"},
		},
		{
			name:   "a wrong recorded uid drops the parent",
			setup:  setup,
			change: []step{addNS(namespace("team", parent("org"), parentUID("org-0"), created(t0.Add(time.Hour))))},
			want:   []string{"DELETED team/p parent@org"},
		},
		{
			name:  "an unrelated annotation changes nothing",
			setup: setup,
			change: []step{addNS(namespace("team", parent("org"), parentUID("org-1"), created(t0.Add(time.Hour)),
				func(ns *corev1.Namespace) { ns.Annotations["example.com/owner"] = "someone" }))},
			want: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if got := runChange(t, policy(), tt.setup, tt.change); !slices.Equal(got, want) {
				t.Errorf("events:\n got %q\nwant %q", got, want)
			}
		})
	}
}

// chainSteps adds namespaces n0 <- n1 <- ... <- n(length-1).
func chainSteps(length int) []step {
	out := []step{addNS(namespace(global))}
	for i := range length {
		var opts []nsOpt
		if i > 0 {
			opts = append(opts, parent(fmt.Sprintf("n%d", i-1)))
		}
		out = append(out, addNS(namespace(fmt.Sprintf("n%d", i), opts...)))
	}
	return out
}

// TestViewEventsMaxDepth checks that with a depth cap of 3 a change reaches
// only the namespaces that inherit it: those at most 3 levels below, and
// every one for a global change.
func TestViewEventsMaxDepth(t *testing.T) {
	t.Parallel()
	p := policy()
	p.MaxDepth = 3
	setup := append(chainSteps(6), putRB("n0", "r"), putRB("n1", "s"))
	tests := []struct {
		name   string
		change []step
		want   []string
	}{
		{
			name:   "an item at the root reaches 3 levels down",
			change: []step{putRB("n0", "x")},
			want:   []string{"ADDED n0/x local@n0", "ADDED n1/x parent@n0", "ADDED n2/x parent@n0", "ADDED n3/x parent@n0"},
		},
		{
			name:   "a global item reaches every namespace, however deep",
			change: []step{putRB(global, "g")},
			want: []string{
				"ADDED implicit-global/g local@implicit-global", "ADDED n0/g global@implicit-global", "ADDED n1/g global@implicit-global",
				"ADDED n2/g global@implicit-global", "ADDED n3/g global@implicit-global", "ADDED n4/g global@implicit-global",
				"ADDED n5/g global@implicit-global",
			},
		},
		{
			name:   "cutting n1 from the root: only the 3 levels that inherited from it change",
			change: []step{addNS(namespace("n1"))},
			want:   []string{"DELETED n1/r parent@n0", "DELETED n2/r parent@n0", "DELETED n3/r parent@n0"},
		},
		{
			name:   "an exclusion at the root reaches 3 levels down",
			change: []step{addNS(namespace("n0", exclude("rolebindings/*"))), putRB(global, "g")},
			want: []string{
				"ADDED implicit-global/g local@implicit-global",
				"ADDED n4/g global@implicit-global", "ADDED n5/g global@implicit-global",
			},
		},
		{
			name:   "deleting the root: only the 3 levels below it change",
			change: []step{delNS("n0")},
			want:   []string{"DELETED n0/r local@n0", "DELETED n1/r parent@n0", "DELETED n2/r parent@n0", "DELETED n3/r parent@n0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if got := runChange(t, p, setup, tt.change); !slices.Equal(got, want) {
				t.Errorf("events:\n got %q\nwant %q", got, want)
			}
		})
	}
}

// identityWorld makes random changes of namespaces (parents, recorded
// parent uids, uids and creation times, exclusions) and sources, and
// remembers the current objects, to build a fresh mux of the same state.
type identityWorld struct {
	rng        *rand.Rand
	names      []string
	namespaces map[string]*corev1.Namespace
	sources    map[string]*rbacv1.RoleBinding
	gen        int
}

func (w *identityWorld) pick(from []string) string { return from[w.rng.IntN(len(from))] }

func (w *identityWorld) step(m *watchmux.Mux) string {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	switch r := w.rng.IntN(100); {
	case r < 35:
		ns := w.pick(append([]string{global}, w.names...))
		rb := roleBinding(ns, w.pick([]string{"a", "b", "c"}))
		w.sources[ns+"/"+rb.Name] = rb
		m.OnSource(rolebindings, rb, false)
		return "put " + ns + "/" + rb.Name
	case r < 45:
		key := w.pick(append(slices.Sorted(maps.Keys(w.sources)), "none"))
		rb, ok := w.sources[key]
		if !ok {
			return "nothing"
		}
		delete(w.sources, key)
		m.OnSource(rolebindings, rb, true)
		return "delete " + key
	case r < 90:
		name := w.pick(w.names)
		w.gen++
		opts := []nsOpt{uid(fmt.Sprintf("%s-%d", name, w.rng.IntN(2))), created(base.Add(time.Duration(w.rng.IntN(3)) * time.Hour))}
		if p := w.pick(append(slices.Clone(w.names), "", "")); p != "" {
			opts = append(opts, parent(p))
			switch w.rng.IntN(3) {
			case 0:
				opts = append(opts, parentUID(fmt.Sprintf("%s-%d", p, w.rng.IntN(2))))
			case 1:
				if cur, ok := w.namespaces[p]; ok {
					opts = append(opts, parentUID(string(cur.UID)))
				}
			}
		}
		if w.rng.IntN(4) == 0 {
			opts = append(opts, exclude(w.pick([]string{"rolebindings/a", "rolebindings/*"})))
		}
		ns := namespace(name, opts...)
		ns.ResourceVersion = strconv.Itoa(w.gen)
		w.namespaces[name] = ns
		m.OnNamespace(ns, false)
		return fmt.Sprintf("namespace %s uid %s created %s labels %v annotations %v", name, ns.UID, ns.CreationTimestamp.Format(time.Kitchen), ns.Labels, ns.Annotations)
	default:
		name := w.pick(w.names)
		delete(w.namespaces, name)
		m.OnNamespace(namespace(name), true)
		return "delete namespace " + name
	}
}

// TestEventsFollowViewsWithIdentityAndDepth applies random changes to a
// mux with a depth cap of 2 and checks that an all-namespaces watcher,
// folding its events, ends with the views of a mux built afresh from the
// final objects: nothing a change leaves cached (lineages) or skips
// (namespaces beyond the cap) makes the views drift.
func TestEventsFollowViewsWithIdentityAndDepth(t *testing.T) {
	t.Parallel()
	p := policy()
	p.MaxDepth = 2
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			t.Parallel()
			w := &identityWorld{
				rng:        rand.New(rand.NewPCG(seed, seed*7919)),
				names:      []string{"n0", "n1", "n2", "n3", "n4", "n5"},
				namespaces: map[string]*corev1.Namespace{},
				sources:    map[string]*rbacv1.RoleBinding{},
			}
			m := watchmux.New(p, []string{rolebindings}, &objects{}, watchmux.Options{BufferSize: 10_000})
			m.OnNamespace(namespace(global), false)
			var log []string
			for range 30 {
				log = append(log, w.step(m))
			}
			m.MarkSynced()
			defer func() {
				if t.Failed() {
					t.Logf("steps:\n%s", strings.Join(log, "\n"))
				}
			}()
			views, start := readViews(t, m, rolebindings)
			tr := &tracked{name: "all", start: start, state: views}
			tr.f = watchAndFollow(t, m, watchmux.WatchOptions{ResourceVersion: rvText(start)})
			for range 300 {
				log = append(log, w.step(m))
				// Read between changes, so that cached lineages are used.
				readViews(t, m, rolebindings)
			}
			got, end := readViews(t, m, rolebindings)
			fold(t, tr, tr.f.waitFor(t, int(end-start)))

			fresh := watchmux.New(p, []string{rolebindings}, &objects{}, watchmux.Options{})
			fresh.OnNamespace(namespace(global), false)
			for _, ns := range w.namespaces {
				fresh.OnNamespace(ns, false)
			}
			for _, rb := range w.sources {
				fresh.OnSource(rolebindings, rb, false)
			}
			fresh.MarkSynced()
			want, _ := readViews(t, fresh, rolebindings)
			if !maps.Equal(got, want) {
				t.Errorf("views after the changes differ from a fresh mux's:\n got %v\nwant %v", got, want)
			}
			if !maps.Equal(tr.state, want) {
				t.Errorf("the watcher's folded events differ from a fresh mux's views:\n got %v\nwant %v", tr.state, want)
			}
		})
	}
}

// TestLineageOfMissingNamespaces checks that asking about namespaces that
// don't exist (any name can be asked for: an authorization request names
// any namespace) leaves their views empty, and that one created afterwards
// gets its inheritance at once.
func TestLineageOfMissingNamespaces(t *testing.T) {
	t.Parallel()
	m := newMux(watchmux.Options{})
	for _, s := range []step{addNS(namespace(global)), addNS(namespace("org")), putRB(global, "g"), putRB("org", "p")} {
		s(m)
	}
	m.MarkSynced()
	for i := range 100 {
		if _, err := m.LineageGeneration(fmt.Sprintf("ghost-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if views, _ := readViews(t, m, rolebindings); len(inNamespace(views, "ghost-0")) != 0 {
		t.Fatalf("ghost-0 has a view: %v", inNamespace(views, "ghost-0"))
	}
	m.OnNamespace(namespace("ghost-0", parent("org")), false)
	views, _ := readViews(t, m, rolebindings)
	got := slices.Sorted(maps.Keys(inNamespace(views, "ghost-0")))
	if want := []string{"ghost-0/g", "ghost-0/p"}; !slices.Equal(got, want) {
		t.Errorf("ghost-0's view once created = %q, want %q", got, want)
	}
}
