package watchmux_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// TestHubGlobalSources reads the global scope from a hub cluster: the hub's
// global namespace provides the global items, marked with the hub's name,
// the member's own global namespace is no source any more, the member's
// parents still override the hub's items, and a hub change fires the
// members' views.
func TestHubGlobalSources(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	hub := fake.NewClientset(namespace(global), roleBinding(global, "org-viewers"), roleBinding(global, "ci-bot"))
	member := fake.NewClientset(
		namespace(global), roleBinding(global, "member-global"), // not a source in hub mode
		namespace("org"), roleBinding("org", "org-viewers"),
		namespace("team-a", parent("org")),
	)
	hubFactory := informers.NewSharedInformerFactoryWithOptions(hub, 0, informers.WithNamespace(global))
	memberFactory := informers.NewSharedInformerFactory(member, 0)
	m := newMux(watchmux.Options{})
	for _, err := range []error{
		m.AddNamespaceInformer(memberFactory.Core().V1().Namespaces().Informer()),
		addSource(m, rolebindings, watchmux.Source{Informer: memberFactory.Rbac().V1().RoleBindings().Informer()}),
		addSource(m, rolebindings, watchmux.Source{Informer: hubFactory.Rbac().V1().RoleBindings().Informer(), Cluster: "hub"}),
	} {
		if err != nil {
			t.Fatal(err)
		}
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
		hubFactory.Shutdown()
		memberFactory.Shutdown()
	})
	hubFactory.Start(runCtx.Done())
	memberFactory.Start(runCtx.Done())
	testwait.For(t, "the informers sync", m.HasSynced)

	var results []merge.Result
	read := func() {
		t.Helper()
		if _, err := m.Read(func(r watchmux.Reader) { results = r.Results(rolebindings, "team-a", "") }); err != nil {
			t.Fatal(err)
		}
	}
	read()
	got := map[string]string{}
	for _, r := range results {
		got[r.Item.Name] = string(r.Scope) + "/" + r.Item.Namespace + "@" + r.Item.Cluster
	}
	want := map[string]string{
		"ci-bot":      "global/" + global + "@hub",
		"org-viewers": "parent/org@", // the member's parent overrides the hub's global item
	}
	if len(got) != len(want) {
		t.Fatalf("team-a's view: %v, want %v (the member's own %s/member-global is no source)", got, want, global)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("team-a's view of %s: %s, want %s", k, got[k], v)
		}
	}

	_, rv := readViews(t, m, rolebindings)
	f := watchAndFollow(t, m, watchmux.WatchOptions{Resource: rolebindings, Namespace: "team-a", ResourceVersion: rvText(rv)})
	t.Log("a hub edit of ci-bot fires team-a's view")
	ci := roleBinding(global, "ci-bot")
	ci.ResourceVersion = nextRV()
	ci.Labels["edited"] = "true"
	if _, err := hub.RbacV1().RoleBindings(global).Update(ctx, ci, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	evs := f.waitFor(t, 1)
	if d := describeEvent(evs[0]); evs[0].Type != "MODIFIED" || !strings.Contains(d, "ci-bot") {
		t.Errorf("event %s, want MODIFIED of ci-bot", d)
	}
	t.Log("a change in the member's own global namespace changes nothing: the next event is the hub's sentinel edit")
	mg := roleBinding(global, "member-global")
	mg.ResourceVersion = nextRV()
	mg.Labels["edited"] = "true"
	if _, err := member.RbacV1().RoleBindings(global).Update(ctx, mg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the member's update is applied", func() bool {
		list, err := memberFactory.Rbac().V1().RoleBindings().Lister().RoleBindings(global).Get("member-global")
		return err == nil && list.Labels["edited"] == "true"
	})
	ci = ci.DeepCopy()
	ci.ResourceVersion = nextRV()
	ci.Labels["sentinel"] = "true"
	if _, err := hub.RbacV1().RoleBindings(global).Update(ctx, ci, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	evs = f.waitFor(t, 2)
	if d := describeEvent(evs[1]); evs[1].Type != "MODIFIED" || !strings.Contains(d, "ci-bot") {
		t.Errorf("the event after the member's own global change is %s, want the sentinel MODIFIED ci-bot", d)
	}
	read()
	for _, r := range results {
		if r.Item.Name == "member-global" {
			t.Errorf("the member's own global namespace item %s is in team-a's view", r.Item.Name)
		}
	}
}
