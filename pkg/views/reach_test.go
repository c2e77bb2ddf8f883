package views_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// deletedLater is issue 38's case 5: RoleBindings a, c, d in team-x
// (revisions 3 to 5), b created at 6 and deleted at 7. Replica A saw every
// event: its RoleBindings are at 7. Replica B started after the deletion
// and was fed through no Tracker (as a kind the dynamic informers read):
// its newest object names the same state by revision 5, and no change
// comes to move it while RoleBindings stay quiet.
type deletedLater struct {
	namespaces []*corev1.Namespace
	log        []runtime.Object // RoleBindings by revision; b's deletion at 7
	// namespaceLists counts the namespaces' exact lists: a past state of
	// one namespace's view lists them first; a catch-up never does here.
	namespaceLists atomic.Int64
}

func newDeletedLater() *deletedLater {
	ns := func(name string, rev int) *corev1.Namespace {
		n := namespace(name)
		n.ResourceVersion = strconv.Itoa(rev)
		return n
	}
	rb := func(name string, rev int) runtime.Object {
		o := roleBinding("team-x", name)
		o.ResourceVersion = strconv.Itoa(rev)
		return o
	}
	return &deletedLater{
		namespaces: []*corev1.Namespace{ns(global, 1), ns("team-x", 2)},
		log:        []runtime.Object{rb("a", 3), rb("c", 4), rb("d", 5), rb("b", 6), rb("b", 7)},
	}
}

// bindingsAt lists the RoleBindings as of revision at (Exact).
func (d *deletedLater) bindingsAt(_ context.Context, at, namespace string) ([]runtime.Object, error) {
	r, _ := strconv.Atoi(at)
	held := map[string]runtime.Object{}
	var order []string
	for i, o := range d.log {
		if i+3 > r {
			break
		}
		acc, _ := meta.Accessor(o)
		if _, ok := held[acc.GetName()]; !ok {
			order = append(order, acc.GetName())
		}
		held[acc.GetName()] = o
		if i+3 == 7 {
			delete(held, acc.GetName()) // b's deletion
		}
	}
	var out []runtime.Object
	for _, n := range order {
		if o, ok := held[n]; ok && (namespace == "" || namespace == "team-x") {
			out = append(out, o.DeepCopyObject())
		}
	}
	return out, nil
}

func (d *deletedLater) namespacesAt(context.Context, string, string) ([]runtime.Object, error) {
	d.namespaceLists.Add(1)
	var out []runtime.Object
	for _, n := range d.namespaces {
		out = append(out, n.DeepCopy())
	}
	return out, nil
}

// replica is a synced mux fed changes, with the exact listers.
func (d *deletedLater) replica(changes func(m *watchmux.Mux)) *watchmux.Mux {
	m := watchmux.New(policy(), served, objects(), watchmux.Options{})
	m.SetNamespaceList(d.namespacesAt)
	m.SetSourceList(rolebindings.Resource, "", d.bindingsAt)
	for _, n := range d.namespaces {
		m.OnNamespace(n, false)
	}
	changes(m)
	m.MarkSynced()
	return m
}

// TestListsCatchUp is issue 38's case 5: on replica B, which names A's
// state by an older revision, a list at A's version, in each form, is
// served as a watch from it is (B's informers are compared with their
// lists at A's revisions: the state is B's), not answered 504 after 3 s.
func TestListsCatchUp(t *testing.T) {
	t.Parallel()
	d := newDeletedLater()
	a := d.replica(func(m *watchmux.Mux) {
		for i, o := range d.log {
			m.OnSource(rolebindings.Resource, o, i == len(d.log)-1)
		}
	})
	b := d.replica(func(m *watchmux.Mux) {
		for _, o := range d.log[:3] {
			m.OnSource(rolebindings.Resource, o, false)
		}
	})
	storage := func(m *watchmux.Mux) *registry.Storage {
		return registry.NewStorage(group, kinds.RoleBindings(), views.New(rolebindings, m))
	}
	ctx := genericapirequest.WithNamespace(context.Background(), "team-x")
	list := func(s *registry.Storage, opts *metainternalversion.ListOptions) ([]string, string, string, error) {
		obj, err := s.List(ctx, opts)
		if err != nil {
			return nil, "", "", err
		}
		items, err := meta.ExtractList(obj)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, it := range items {
			acc, _ := meta.Accessor(it)
			names = append(names, acc.GetName())
		}
		l, _ := meta.ListAccessor(obj)
		return names, l.GetResourceVersion(), l.GetContinue(), nil
	}
	first, version, token, err := list(storage(a), &metainternalversion.ListOptions{Limit: 2})
	if err != nil || token == "" {
		t.Fatalf("A's first page: %v, %q, %v; want two items and a continuation", first, token, err)
	}
	t.Logf("A's version %s, B's %s", version, currentRV(t, b))
	t.Cleanup(func() {
		if n := d.namespaceLists.Load(); n != 0 {
			t.Errorf("%d exact lists of the namespaces: A's version is B's state, served without listing a past state", n)
		}
	})

	for _, tc := range []struct {
		name string
		opts *metainternalversion.ListOptions
		want []string
	}{{
		name: "the continuation of A's limit=2 list",
		opts: &metainternalversion.ListOptions{Limit: 2, Continue: token},
		want: []string{"d"},
	}, {
		name: "a NotOlderThan list at A's version",
		opts: &metainternalversion.ListOptions{ResourceVersion: version, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan},
		want: []string{"a", "c", "d"},
	}, {
		name: "an Exact list at A's version",
		opts: &metainternalversion.ListOptions{ResourceVersion: version, ResourceVersionMatch: metav1.ResourceVersionMatchExact},
		want: []string{"a", "c", "d"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// A replica of its own: each form catches up by itself.
			b := d.replica(func(m *watchmux.Mux) {
				for _, o := range d.log[:3] {
					m.OnSource(rolebindings.Resource, o, false)
				}
			})
			start := time.Now()
			names, rv, _, err := list(storage(b), tc.opts)
			if err != nil {
				t.Fatalf("on B after %v: %v, want it served", time.Since(start).Round(time.Millisecond), err)
			}
			if !equal(names, tc.want) {
				t.Errorf("on B: %v, want %v", names, tc.want)
			}
			if tc.opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact && rv != version {
				t.Errorf("an Exact list's resourceVersion %s, want %s", rv, version)
			}
		})
	}

	// A watch from the same version is served on B, as it was before.
	w, err := b.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings.Resource, Namespace: "team-x", ResourceVersion: version})
	if err != nil {
		t.Fatalf("a watch on B from A's version: %v", err)
	}
	w.Stop()
}

func equal(a, b []string) bool {
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
