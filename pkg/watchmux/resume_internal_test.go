package watchmux

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// naiveResumeEvents is what a resume sends, merged namespace by namespace:
// the reference the shared plain-tenant views must match. Inside a change,
// the rest of the change first (the namespaces from want's on, to the view
// at want's vector); then the difference from there to the current view.
func naiveResumeEvents(m *Mux, p *pastState, want rv.Version, opts WatchOptions) []*Event {
	past := []string{opts.Namespace}
	namespaces := past
	if opts.Namespace == "" {
		past = p.namespaces()
		namespaces = sets.List(sets.New(past...).Insert(m.st.namespaceNames()...))
	}
	var out []*Event
	if want.Mid != nil {
		for _, ns := range past {
			if ns >= want.Mid.Namespace {
				out = append(out, diffWith(opts.Resource, ns, p.view(want, opts.Resource, ns, opts.Name), p.after.results(opts.Resource, ns, opts.Name), sameContent)...)
			}
		}
	}
	for _, ns := range namespaces {
		out = append(out, diffWith(opts.Resource, ns, p.after.results(opts.Resource, ns, opts.Name), m.st.results(opts.Resource, ns, opts.Name), sameContent)...)
	}
	return out
}

// randomCluster writes random namespaces (parents, exclusions, non-tenants)
// and RoleBindings (global, some locked; local), and edits them.
type randomCluster struct {
	rng *rand.Rand
	rev int
	nss map[string]*corev1.Namespace
	rbs map[string]*rbacv1.RoleBinding
}

// newRandomCluster is a mux of the global namespace "g" and ten tenants
// t0..t9, and the random cluster that feeds it, seeded with seed and stream.
func newRandomCluster(seed, stream uint64) (*Mux, *randomCluster) {
	m := New(merge.Policy{GlobalNamespace: "g"}, []string{"rolebindings"}, itemObjects{}, Options{})
	c := &randomCluster{rng: rand.New(rand.NewPCG(seed, stream)), nss: map[string]*corev1.Namespace{}, rbs: map[string]*rbacv1.RoleBinding{}}
	c.namespace(m, "g")
	for i := range 10 {
		c.namespace(m, fmt.Sprintf("t%d", i))
	}
	return m, c
}

func (c *randomCluster) next() string { c.rev++; return strconv.Itoa(c.rev) }

func (c *randomCluster) namespace(m *Mux, name string) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: c.next(), Labels: map[string]string{}, Annotations: map[string]string{}}}
	if name != "g" {
		switch c.rng.IntN(6) {
		case 0, 1:
			ns.Labels[v1alpha1.LabelParent] = fmt.Sprintf("t%d", c.rng.IntN(10))
		case 2:
			ns.Annotations[v1alpha1.AnnotationExclude] = fmt.Sprintf("rolebindings/g-%d", c.rng.IntN(4))
		case 3:
			ns.Labels[v1alpha1.LabelInherit] = "false"
		}
	}
	c.nss[name] = ns
	m.OnNamespace(ns, false)
}

func (c *randomCluster) binding(m *Mux, namespace, name string) {
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + namespace + "-" + name), ResourceVersion: c.next()},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "u" + strconv.Itoa(c.rev)}},
	}
	if c.rng.IntN(4) == 0 {
		rb.Annotations = map[string]string{v1alpha1.AnnotationLocked: "true"}
	}
	c.rbs[namespace+"/"+name] = rb
	m.OnSource("rolebindings", rb, false)
}

func (c *randomCluster) step(m *Mux) {
	switch n := c.rng.IntN(10); {
	case n < 3:
		c.namespace(m, fmt.Sprintf("t%d", c.rng.IntN(10)))
	case n < 5:
		c.binding(m, "g", fmt.Sprintf("g-%d", c.rng.IntN(4)))
	case n < 7:
		c.binding(m, fmt.Sprintf("t%d", c.rng.IntN(10)), fmt.Sprintf("g-%d", c.rng.IntN(6)))
	default:
		for k, rb := range c.rbs {
			delete(c.rbs, k)
			rb = rb.DeepCopy()
			rb.ResourceVersion = c.next()
			m.OnSource("rolebindings", rb, true)
			break
		}
	}
}

// lists are the cluster's objects now, as exact lists return them.
func (c *randomCluster) lists() map[string][]runtime.Object {
	out := map[string][]runtime.Object{}
	for _, ns := range c.nss {
		out[namespacesKey] = append(out[namespacesKey], ns.DeepCopy())
	}
	for _, rb := range c.rbs {
		out["rolebindings"] = append(out["rolebindings"], rb.DeepCopy())
	}
	return out
}

// TestResumeSharedPlainViews checks that a resume's events, with the
// plain tenants' views merged once per state, from the mux's state or from
// a copy of it, are those of merging every namespace's view, before and
// inside a change, for all namespaces and one.
func TestResumeSharedPlainViews(t *testing.T) {
	t.Parallel()
	for seed := range uint64(40) {
		m, c := newRandomCluster(seed, 31)
		rng := c.rng
		for range 8 {
			c.step(m)
		}
		beforeChange := c.lists()
		for range 1 + rng.IntN(3) {
			c.step(m)
		}
		atVersion := c.lists()
		for range 1 + rng.IntN(6) {
			c.step(m)
		}
		m.mu.RLock()
		cfg := m.pastConfigLocked()
		m.mu.RUnlock()
		p := &pastState{after: cfg.build(atVersion)}
		want := rv.Version{}
		if rng.IntN(2) == 0 {
			p.before = cfg.build(beforeChange)
			want.Mid = &rv.Mid{Index: rng.IntN(3), Namespace: fmt.Sprintf("t%d", rng.IntN(10))}
		}
		for _, scope := range []string{"", "t3"} {
			opts := WatchOptions{Resource: "rolebindings", Namespace: scope}
			r := m.resumeEvents(p, want, opts)
			m.mu.RLock()
			got := r.eventsIn(m.st)
			ref := naiveResumeEvents(m, p, want, opts)
			current := m.currentCopyLocked(opts.Resource)
			m.mu.RUnlock()
			fromCopy := m.resumeEvents(p, want, opts).eventsIn(current.build())
			describe := func(evs []*Event) []string {
				var out []string
				for _, e := range evs {
					out = append(out, fmt.Sprintf("%s %s/%s from %s@%s %s %v", e.Type, e.Namespace, e.Name, e.Result.Item.Namespace,
						e.Result.Item.Object.(*rbacv1.RoleBinding).ResourceVersion, e.Result.Scope, e.Result.Conflicts))
				}
				return out
			}
			g, w := describe(got), describe(ref)
			if fmt.Sprint(g) != fmt.Sprint(w) {
				t.Errorf("seed %d, scope %q, mid %v: the resume's events\n %v\nwant those of merging every namespace\n %v", seed, scope, want.Mid, g, w)
			}
			if c := describe(fromCopy); fmt.Sprint(c) != fmt.Sprint(w) {
				t.Errorf("seed %d, scope %q, mid %v: the resume's events from a copy of the current state\n %v\nwant those of merging every namespace\n %v", seed, scope, want.Mid, c, w)
			}
		}
	}
}

// TestWatchListSnapshotFromCopy checks that the initial events of a
// watch-list of every namespace, merged from a copy of the state's inputs
// after the lock is released, are those merged from the state itself.
func TestWatchListSnapshotFromCopy(t *testing.T) {
	t.Parallel()
	checked := 0
	for seed := range uint64(40) {
		m, c := newRandomCluster(seed, 47)
		rng := c.rng
		for i := range 4 {
			c.binding(m, "g", fmt.Sprintf("g-%d", i))
		}
		for range 5 + rng.IntN(20) {
			c.step(m)
		}
		for _, name := range []string{"", "g-1"} {
			opts := WatchOptions{Resource: "rolebindings", Name: name}
			m.mu.RLock()
			want := snapshotOf(m.st, opts, 7, "v7")
			current := m.currentCopyLocked(opts.Resource)
			m.mu.RUnlock()
			got := snapshotOf(current.build(), opts, 7, "v7")
			describe := func(evs []*Event) []string {
				var out []string
				for _, e := range evs {
					out = append(out, fmt.Sprintf("%s %s/%s@%d %s from %s@%s %s %v", e.Type, e.Namespace, e.Name, e.RV, e.text, e.Result.Item.Namespace,
						e.Result.Item.Object.(*rbacv1.RoleBinding).ResourceVersion, e.Result.Scope, e.Result.Conflicts))
				}
				return out
			}
			if g, w := describe(got), describe(want); fmt.Sprint(g) != fmt.Sprint(w) {
				t.Errorf("seed %d, name %q: the snapshot from a copy\n %v\nwant the state's\n %v", seed, name, g, w)
			}
			if len(want) > 0 {
				checked++
			}
		}
	}
	if checked < 40 {
		t.Errorf("only %d of 80 snapshots held an item: too few checked", checked)
	}
}
