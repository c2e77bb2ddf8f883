package watchmux_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// TestInformers feeds a mux from shared informers of a fake clientset: Run
// waits for them to sync, every change reaches the watchers, and an informer
// resync (same resourceVersion) makes no event.
func TestInformers(t *testing.T) {
	t.Parallel()
	// Everything runs in a bubble (the fake clientset has no network):
	// synctest.Wait says when the checks that nothing happened can look.
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		g1 := roleBinding(global, "g1")
		client := fake.NewClientset(
			namespace(global), namespace("org"), namespace("team-a", parent("org")), namespace("solo"),
			g1, roleBinding("org", "p1"),
		)
		factory := informers.NewSharedInformerFactory(client, 0)
		m := newMux(watchmux.Options{})
		if err := m.AddNamespaceInformer(factory.Core().V1().Namespaces().Informer()); err != nil {
			t.Fatal(err)
		}
		if err := addSource(m, rolebindings, watchmux.Source{Informer: factory.Rbac().V1().RoleBindings().Informer()}); err != nil {
			t.Fatal(err)
		}
		if err := addSource(m, roles, watchmux.Source{Informer: factory.Rbac().V1().Roles().Informer()}); err == nil {
			t.Error("an informer of a resource that is not served was accepted")
		}

		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			m.Run(runCtx)
		}()
		t.Cleanup(func() {
			cancel()
			<-done
			factory.Shutdown()
		})
		// Informers that never start never sync: on purpose, let a minute
		// of the bubble's clock pass and every goroutine do all it can
		// before looking.
		time.Sleep(time.Minute)
		synctest.Wait()
		if m.HasSynced() {
			t.Fatal("synced before the informers started")
		}
		factory.Start(runCtx.Done())
		testwait.For(t, "the informers sync", m.HasSynced)

		initial, rv := readViews(t, m, rolebindings)
		if len(initial) != 6 { // g1 in 4 views, p1 in 2
			t.Errorf("synced views: %v, want 6 items", initial)
		}
		f := watchAndFollow(t, m, watchmux.WatchOptions{ResourceVersion: rvText(rv)})

		// An update of the global item: every view that holds it.
		g1 = g1.DeepCopy()
		g1.ResourceVersion = nextRV()
		g1.Labels["edited"] = "true"
		if _, err := client.RbacV1().RoleBindings(global).Update(ctx, g1, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// An update with the same resourceVersion is a resync: nothing.
		if _, err := client.RbacV1().RoleBindings(global).Update(ctx, g1.DeepCopy(), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// team-a leaves org: it loses p1.
		teamA := namespace("team-a")
		teamA.ResourceVersion = nextRV()
		if _, err := client.CoreV1().Namespaces().Update(ctx, teamA, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.RbacV1().RoleBindings("org").Delete(ctx, "p1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.RbacV1().RoleBindings("solo").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: sourceMeta("solo", "s1")}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"ADDED solo/s1 local@solo",
			"DELETED org/p1 local@org",
			"DELETED team-a/p1 parent@org",
			"MODIFIED implicit-global/g1 local@implicit-global",
			"MODIFIED org/g1 global@implicit-global",
			"MODIFIED solo/g1 global@implicit-global",
			"MODIFIED team-a/g1 global@implicit-global",
		}
		got := f.waitFor(t, len(want))
		if g := describeEvents(got); !slices.Equal(g, want) {
			t.Errorf("events:\n got %q\nwant %q", g, want)
		}
		// Every goroutine has done all it can (the informers delivered every
		// change, the fan-out sent every event, the follower received them): an
		// event of the resync would be here by now.
		synctest.Wait()
		if extra := f.received()[len(want):]; len(extra) > 0 {
			t.Errorf("unexpected events (a resync?): %q", describeEvents(extra))
		}

		cancel()
		<-done
		f.waitClosed(t)
	})
}

// addSource is AddSource for callers that let Run wait for the source.
func addSource(m *watchmux.Mux, resource string, s watchmux.Source) error {
	_, err := m.AddSource(resource, s)
	return err
}
