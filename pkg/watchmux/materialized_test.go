package watchmux_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// TestMaterializedCopiesAreNoSources: an object labelled
// implicit.dev/materialized: "true" never reaches the mirror through
// AddSource; gaining the label removes it from the views, losing it
// adds it; Serving says when the views are complete.
func TestMaterializedCopiesAreNoSources(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	copyOf := func(m *metav1.ObjectMeta) { m.Labels[v1alpha1.LabelMaterialized] = "true" }
	client := fake.NewClientset(
		namespace(global), namespace("team-a"),
		roleBinding(global, "g1"), roleBinding("team-a", "c1", copyOf),
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	m := newMux(watchmux.Options{})
	if err := m.AddNamespaceInformer(factory.Core().V1().Namespaces().Informer()); err != nil {
		t.Fatal(err)
	}
	if err := addSource(m, rolebindings, watchmux.Source{Informer: factory.Rbac().V1().RoleBindings().Informer()}); err != nil {
		t.Fatal(err)
	}
	if m.Serving(rolebindings) {
		t.Error("serving before the sources are read")
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
	factory.Start(runCtx.Done())
	testwait.For(t, "the informers sync", m.HasSynced)
	if !m.Serving(rolebindings) || m.Serving("roles") {
		t.Errorf("Serving(rolebindings) = %v, Serving(roles) = %v; want true, false", m.Serving(rolebindings), m.Serving("roles"))
	}

	items := func() []string {
		v, _ := readViews(t, m, rolebindings)
		return slices.Sorted(maps.Keys(v))
	}
	if got, want := items(), []string{global + "/g1", "team-a/g1"}; !slices.Equal(got, want) {
		t.Errorf("views %v, want %v: the copy c1 is no source", got, want)
	}

	update := func(ns, name string, materialized bool) {
		t.Helper()
		rb, err := client.RbacV1().RoleBindings(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rb.ResourceVersion = nextRV()
		if materialized {
			rb.Labels[v1alpha1.LabelMaterialized] = "true"
		} else {
			delete(rb.Labels, v1alpha1.LabelMaterialized)
		}
		if _, err := client.RbacV1().RoleBindings(ns).Update(ctx, rb, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update("team-a", "c1", false)
	testwait.For(t, "c1, without the label, is a local source", func() bool {
		return slices.Equal(items(), []string{global + "/g1", "team-a/c1", "team-a/g1"})
	})
	update(global, "g1", true)
	testwait.For(t, "g1, labelled, leaves every view", func() bool {
		return slices.Equal(items(), []string{"team-a/c1"})
	})
}
