package registry_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// notifyingViewer is a fakeViewer that says when its views change, as the
// mux does (registry.ChangeNotifier).
type notifyingViewer struct {
	*fakeViewer
	nextMu sync.Mutex
	next   chan struct{}
}

var _ registry.ChangeNotifier = &notifyingViewer{}

func newNotifyingViewer(items ...runtime.Object) *notifyingViewer {
	return &notifyingViewer{fakeViewer: newFakeViewer("rolebindings", items...), next: make(chan struct{})}
}

// NextChange implements registry.ChangeNotifier.
func (n *notifyingViewer) NextChange() <-chan struct{} {
	n.nextMu.Lock()
	defer n.nextMu.Unlock()
	return n.next
}

// change changes the views and wakes the waiters.
func (n *notifyingViewer) change(rv string, items ...runtime.Object) {
	n.fakeViewer.change(rv, items...)
	n.nextMu.Lock()
	close(n.next)
	n.next = make(chan struct{})
	n.nextMu.Unlock()
}

// TestListAheadWakesOnChange: a list of a version ahead of the view, and a
// continuation of a token ahead of it, wait on the view's change signal:
// they are answered the moment the view reaches the version, with no time
// passing (a poll would answer 250 ms later); a request that ends stops
// the wait at once, and the wait ends at 3 s on the storage's clock.
func TestListAheadWakesOnChange(t *testing.T) {
	notOlder := &metainternalversion.ListOptions{ResourceVersion: "f7.v4712", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}
	list := func(ctx context.Context, s *registry.Storage, opts *metainternalversion.ListOptions) (string, error) {
		obj, err := s.List(genericapirequest.WithNamespace(ctx, ""), opts)
		if err != nil {
			return "", err
		}
		l, _ := obj.(metav1.ListInterface)
		return l.GetResourceVersion(), nil
	}

	synctest.Test(t, func(t *testing.T) {
		viewer := newNotifyingViewer(pagedItems()...)
		s := registry.NewStorage(group, kinds.RoleBindings(), viewer)
		start := time.Now()
		var rv string
		var err error
		done := make(chan struct{})
		go func() { defer close(done); rv, err = list(t.Context(), s, notOlder) }()
		synctest.Wait()
		viewer.change("f7.v4712", pagedItems()...)
		<-done
		if err != nil || rv != "f7.v4712" {
			t.Fatalf("list: %q, %v; want the view at f7.v4712", rv, err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("answered %v after the view reached the version, want at once", waited)
		}
	})

	synctest.Test(t, func(t *testing.T) {
		viewerA := newNotifyingViewer(pagedItems()...)
		viewerA.change("f7.v4712.s1c0000000000001", pagedItems()...)
		first, err := listPage(t, registry.NewStorage(group, kinds.RoleBindings(), viewerA), &metainternalversion.ListOptions{Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		viewerB := newNotifyingViewer(pagedItems()...)
		viewerB.change("f7.v4711.s2d0000000000005", pagedItems()...)
		b := registry.NewStorage(group, kinds.RoleBindings(), viewerB)
		start := time.Now()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, err = list(t.Context(), b, &metainternalversion.ListOptions{Limit: 2, Continue: first.Continue})
		}()
		synctest.Wait()
		viewerB.change("f7.v4712.s2d0000000000006", pagedItems()...)
		<-done
		if err != nil {
			t.Fatalf("continuation: %v, want the next page once the view caught up", err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("continuation answered %v after the view caught up, want at once", waited)
		}
	})

	synctest.Test(t, func(t *testing.T) {
		s := registry.NewStorage(group, kinds.RoleBindings(), newNotifyingViewer(pagedItems()...))
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		var err error
		done := make(chan struct{})
		go func() { defer close(done); _, err = list(ctx, s, notOlder) }()
		synctest.Wait()
		cancel()
		<-done
		if !apierrors.IsTimeout(err) || time.Since(start) != 0 {
			t.Errorf("a request that ended: %v after %v, want 504 at once", err, time.Since(start))
		}
	})

	synctest.Test(t, func(t *testing.T) {
		s := registry.NewStorage(group, kinds.RoleBindings(), newNotifyingViewer(pagedItems()...))
		start := time.Now()
		_, err := list(t.Context(), s, notOlder)
		if !apierrors.IsTimeout(err) || time.Since(start) != 3*time.Second {
			t.Errorf("a version never reached: %v after %v, want 504 after 3s", err, time.Since(start))
		}
	})
}
