package watchmux

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// itemObjects builds view items as bare copies of the source, with the
// event's version: enough for the mux's own bookkeeping.
type itemObjects struct{}

func (itemObjects) Item(_, namespace string, r merge.Result, rv string) (runtime.Object, error) {
	rb := r.Item.Object.(*rbacv1.RoleBinding).DeepCopy()
	rb.Namespace, rb.ResourceVersion = namespace, rv
	return rb, nil
}

func (itemObjects) Empty(string) runtime.Object { return &rbacv1.RoleBinding{} }

// seqOf is the sequence number a version carries for its issuer.
func seqOf(t *testing.T, version string) uint64 {
	t.Helper()
	v, err := resourceversion.Parse(version)
	if err != nil {
		t.Fatalf("version %q: %v", version, err)
	}
	return v.Seq
}

// TestVersionSpaceExhausted checks what happens after 2^40 events: the mux
// starts over as a new instance, closes every watcher, and never hands out
// one of the old instance's sequence numbers again, not even in a bookmark
// (the old versions are served as another replica's: by their vectors).
func TestVersionSpaceExhausted(t *testing.T) {
	t.Parallel()
	m := New(merge.Policy{GlobalNamespace: global}, []string{"rolebindings"}, itemObjects{}, Options{})
	// The largest instance id, so the next one is smaller and any of the
	// old instance's versions numerically larger than the new ones.
	m.v = versions{instance: instanceMax - 1, counter: counterMask - 1}
	m.OnNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, false)
	m.MarkSynced()
	w, err := m.Watch(context.Background(), WatchOptions{Resource: "rolebindings", AllowBookmarks: true})
	if err != nil {
		t.Fatal(err)
	}
	rb := func(name string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name}}
	}
	m.OnSource("rolebindings", rb("last"), false) // the last version of the instance
	m.OnSource("rolebindings", rb("over"), false) // no version left: start over

	var got []watch.Event
	for ev := range w.ResultChan() {
		got = append(got, ev)
	}
	if len(got) > 1 {
		t.Errorf("the old instance's watcher got %d events, want at most the last version's", len(got))
	}
	rv, err := m.Read(func(Reader) {})
	if err != nil {
		t.Fatal(err)
	}
	if !m.v.ours(seqOf(t, rv)) || m.v.instance == instanceMax-1 {
		t.Fatalf("after exhaustion: version %s, instance %d; want a new instance", rv, m.v.instance)
	}
	// A watcher of the new instance: a bookmark before any new event must
	// not carry one of the old instance's versions.
	w2, err := m.Watch(context.Background(), WatchOptions{Resource: "rolebindings", AllowBookmarks: true, SendInitialEvents: new(bool)})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	m.bookmark()
	m.OnSource("rolebindings", rb("new"), false)
	select {
	case ev := <-w2.ResultChan():
		if ev.Type == watch.Bookmark {
			rv := ev.Object.(*rbacv1.RoleBinding).ResourceVersion
			if !m.v.ours(seqOf(t, rv)) {
				t.Errorf("bookmark at %s, which this instance answers with 410", rv)
			}
		} else if ev.Object.(*rbacv1.RoleBinding).Name != "new" {
			t.Errorf("first event %s %s, want the new item", ev.Type, ev.Object.(*rbacv1.RoleBinding).Name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
}

// TestGenerationsOfDeletedNamespaces checks that the lineage generation of
// a namespace deleted and created again never repeats one of its earlier
// incarnation (an authorization decision cached for the old one must not be
// reused), and that deleted namespaces leave no generation behind.
func TestGenerationsOfDeletedNamespaces(t *testing.T) {
	t.Parallel()
	m := New(merge.Policy{GlobalNamespace: global}, []string{"rolebindings"}, itemObjects{}, Options{})
	ns := func(name string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	rb := func(namespace, name string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	}
	m.OnNamespace(ns(global), false)
	m.OnSource("rolebindings", rb(global, "g"), false)
	m.MarkSynced()

	seen := map[string]bool{}
	for round := range 3 {
		m.OnNamespace(ns("churn"), false)
		m.OnSource("rolebindings", rb("churn", "local"), false)
		gen, err := m.LineageGeneration("churn")
		if err != nil {
			t.Fatal(err)
		}
		if seen[gen] {
			t.Fatalf("round %d: generation %q of churn repeats an earlier incarnation's", round, gen)
		}
		seen[gen] = true
		m.OnSource("rolebindings", rb("churn", "local"), true)
		m.OnNamespace(ns("churn"), true)
		m.mu.RLock()
		_, kept := m.st.generations["churn"]
		m.mu.RUnlock()
		if kept {
			t.Fatalf("round %d: the deleted namespace churn still has a generation", round)
		}
	}
}
