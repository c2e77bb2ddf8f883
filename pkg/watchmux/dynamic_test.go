package watchmux_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// The run-time configuration of a mux: resources added after sync
// (AddResource), per-resource global namespaces (SetGlobalNamespace) and
// merge options (SetMergeOptions).

// resumeFrom starts a watch of resource, all namespaces, from m's current
// version: it sees the changes made after this call only.
func resumeFrom(t *testing.T, m *watchmux.Mux, resource string) *follower {
	t.Helper()
	return watchAndFollow(t, m, watchmux.WatchOptions{Resource: resource, ResourceVersion: rvText(currentRV(t, m))})
}

// expectEvents waits for len(want) events of f and compares them, sorted.
func expectEvents(t *testing.T, f *follower, offset int, want []string) {
	t.Helper()
	got := describeEvents(f.waitFor(t, offset+len(want))[offset:])
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
}

// expectQuiet checks that a change made no view event at all: the mux's
// version did not move.
func expectQuiet(t *testing.T, m *watchmux.Mux, before uint64, what string) {
	t.Helper()
	if rv := currentRV(t, m); rv != before {
		t.Errorf("%s: version moved from %d to %d, want no events", what, before, rv)
	}
}

// runtimeMux is a synced mux of the hierarchy serving RoleBindings, with g1
// global and p1 in org, and roles added at run time, pending.
func runtimeMux(t *testing.T) *watchmux.Mux {
	t.Helper()
	m := newMux(watchmux.Options{})
	for _, s := range with(putRB(global, "g1"), putRB("org", "p1")) {
		s(m)
	}
	m.MarkSynced()
	if err := m.AddResource(roles, merge.Options{}); err != nil {
		t.Fatalf("AddResource(%s): %v", roles, err)
	}
	return m
}

func TestAddResourceErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		call func(m *watchmux.Mux) error
	}{
		{name: "adding a resource twice", call: func(m *watchmux.Mux) error { return m.AddResource(roles, merge.Options{}) }},
		{name: "adding a configured resource", call: func(m *watchmux.Mux) error { return m.AddResource(rolebindings, merge.Options{}) }},
		{name: "watching the sources of an unknown resource", call: func(m *watchmux.Mux) error {
			client := fake.NewClientset()
			factory := informers.NewSharedInformerFactory(client, 0)
			_, err := m.AddSource("configmaps", watchmux.Source{Informer: factory.Core().V1().ConfigMaps().Informer()})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := runtimeMux(t)
			if err := tt.call(m); err == nil {
				t.Errorf("%s: no error", tt.name)
			}
		})
	}
}

// TestAddResourcePending checks that a resource added at run time makes no
// events until MarkResourceSynced, while the others go on, and exactly its
// views' events after.
func TestAddResourcePending(t *testing.T) {
	t.Parallel()
	m := runtimeMux(t)
	rbs := resumeFrom(t, m, rolebindings)
	rls := resumeFrom(t, m, roles)

	t.Log("While pending, its sources are read but make no events, for anyone")
	before := currentRV(t, m)
	for _, s := range []step{put(roles, role(global, "gr")), put(roles, role("team-a", "ra")), put(roles, role("org", "ro"))} {
		s(m)
	}
	expectQuiet(t, m, before, "sources of a pending resource")
	views, _ := readViews(t, m, rolebindings)
	if got, want := views["team-a/p1"], "team-a/p1 parent@org"; len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("Read of rolebindings while roles are pending: team-a/p1 = %q, want %q...", got, want)
	}

	t.Log("A hierarchy change while pending makes the other resources' events only")
	addNS(namespace("team-a-1", parent("solo")))(m)
	expectEvents(t, rbs, 0, []string{"DELETED team-a-1/p1 parent@org"})

	t.Log("After MarkResourceSynced, a change makes exactly its views' events")
	m.MarkResourceSynced(roles)
	before = currentRV(t, m)
	put(roles, role("org", "r1"))(m)
	expectEvents(t, rls, 0, []string{
		"ADDED org/r1 local@org",
		"ADDED team-a/r1 parent@org",
		"ADDED team-b/r1 parent@org",
	})
	if after := currentRV(t, m); after != before+3 {
		t.Errorf("version after one change of three views = %d, want %d", after, before+3)
	}
	put(roles, role("solo", "sentinel"))(m)
	expectEvents(t, rls, 3, []string{"ADDED solo/sentinel local@solo"})
	if got := rbs.received(); len(got) != 1 {
		t.Errorf("rolebindings watcher got %q, want the hierarchy change only", describeEvents(got))
	}

	t.Log("What was read while pending is in the views: team-a-1 now under solo sees no team-a role")
	views, _ = readViews(t, m, roles)
	var keys []string
	for k := range views {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{
		"implicit-global/gr", "org/gr", "org/r1", "org/ro",
		"solo/gr", "solo/sentinel",
		"team-a-1/gr", "team-a-1/sentinel",
		"team-a/gr", "team-a/r1", "team-a/ra", "team-a/ro",
		"team-b/gr", "team-b/r1", "team-b/ro",
	}
	if !slices.Equal(keys, want) {
		t.Errorf("roles views = %q, want %q", keys, want)
	}
}

// TestAddResourceAddSource feeds a resource added at run time from a
// shared informer of a fake clientset.
func TestAddResourceAddSource(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	client := fake.NewClientset(role("org", "r0"))
	factory := informers.NewSharedInformerFactory(client, 0)
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	m := runtimeMux(t)
	reg, err := m.AddSource(roles, watchmux.Source{Informer: factory.Rbac().V1().Roles().Informer()})
	if err != nil {
		t.Fatalf("AddSource(%s): %v", roles, err)
	}
	before := currentRV(t, m)
	factory.Start(ctx.Done())
	testwait.For(t, "the roles informer syncs", reg.HasSynced)
	expectQuiet(t, m, before, "the initial objects of a pending resource")

	m.MarkResourceSynced(roles)
	rls := resumeFrom(t, m, roles)
	if _, err := client.RbacV1().Roles("solo").Create(ctx, role("solo", "r1"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a role: %v", err)
	}
	expectEvents(t, rls, 0, []string{"ADDED solo/r1 local@solo"})
}

// rolesGlobal is the global namespace of roles in globalsMux.
const rolesGlobal = "roles-global"

// globalsMux is a synced mux of the hierarchy serving RoleBindings, with the
// policy's global namespace, and Roles, with rolesGlobal (excluded, as the
// configuration makes it). Each global namespace has items of both.
func globalsMux(t *testing.T) *watchmux.Mux {
	t.Helper()
	p := policy()
	p.Excluded[rolesGlobal] = true
	m := watchmux.New(p, []string{rolebindings, roles}, &objects{}, watchmux.Options{})
	m.SetGlobalNamespace(roles, rolesGlobal)
	for _, s := range with(
		addNS(namespace(rolesGlobal)),
		putRB(global, "g1"),
		put(roles, role(rolesGlobal, "r1")),
		put(roles, role(global, "old")),
		putRB(rolesGlobal, "not-global"),
	) {
		s(m)
	}
	m.MarkSynced()
	return m
}

// TestSetGlobalNamespace checks that a resource with a global namespace of
// its own inherits from it, and the other resources from the policy's.
func TestSetGlobalNamespace(t *testing.T) {
	t.Parallel()
	tenants := []string{"org", "solo", "team-a", "team-a-1", "team-b"}

	t.Run("views", func(t *testing.T) {
		t.Parallel()
		m := globalsMux(t)
		rls, _ := readViews(t, m, roles)
		rbs, _ := readViews(t, m, rolebindings)
		for _, ns := range tenants {
			if got := describeOf(rls[ns+"/r1"]); got != ns+"/r1 global@"+rolesGlobal {
				t.Errorf("roles %s/r1 = %q, want global from %s", ns, got, rolesGlobal)
			}
			if got, ok := rls[ns+"/old"]; ok {
				t.Errorf("roles %s/old = %q: the policy's global namespace is not roles' global scope", ns, got)
			}
			if got := describeOf(rbs[ns+"/g1"]); got != ns+"/g1 global@"+global {
				t.Errorf("rolebindings %s/g1 = %q, want global from %s", ns, got, global)
			}
			if got, ok := rbs[ns+"/not-global"]; ok {
				t.Errorf("rolebindings %s/not-global = %q: %s is not rolebindings' global scope", ns, got, rolesGlobal)
			}
		}
		if got := describeOf(rls[global+"/old"]); got != global+"/old local@"+global {
			t.Errorf("roles %s/old = %q, want its own local item", global, got)
		}
	})

	t.Run("an edit in the resource's global namespace reaches every tenant", func(t *testing.T) {
		t.Parallel()
		m := globalsMux(t)
		rls := resumeFrom(t, m, roles)
		genBefore, err := m.LineageGeneration("solo")
		if err != nil {
			t.Fatal(err)
		}
		legacyBefore, _ := m.LineageGeneration("legacy")
		n, err := reach(t, m, roles, rolesGlobal, "r1", role(rolesGlobal, "r1"))
		if err != nil {
			t.Fatal(err)
		}
		if want := len(tenants) + 1; n != want { // and its own view
			t.Errorf("Reach of an edit in %s = %d, want %d", rolesGlobal, n, want)
		}
		if n, _ := reach(t, m, roles, global, "old", role(global, "old")); n != 1 {
			t.Errorf("Reach of a roles edit in %s = %d, want 1 (its own view)", global, n)
		}
		if n, _ := reach(t, m, rolebindings, rolesGlobal, "not-global", roleBinding(rolesGlobal, "not-global")); n != 1 {
			t.Errorf("Reach of a rolebindings edit in %s = %d, want 1 (its own view)", rolesGlobal, n)
		}

		put(roles, role(rolesGlobal, "r1"))(m)
		want := []string{"MODIFIED " + rolesGlobal + "/r1 local@" + rolesGlobal}
		for _, ns := range tenants {
			want = append(want, "MODIFIED "+ns+"/r1 global@"+rolesGlobal)
		}
		expectEvents(t, rls, 0, want)
		for ns, before := range map[string]string{"solo": genBefore, "legacy": legacyBefore} {
			// legacy's own view does not change: its key moves with the global namespaces'.
			if after, _ := m.LineageGeneration(ns); after == before {
				t.Errorf("LineageGeneration(%s) = %q before and after an edit in %s", ns, after, rolesGlobal)
			}
		}

		t.Log("an edit of roles in the policy's global namespace reaches its own view only")
		put(roles, role(global, "old"))(m)
		expectEvents(t, rls, len(want), []string{"MODIFIED " + global + "/old local@" + global})
		put(roles, role("solo", "sentinel"))(m)
		expectEvents(t, rls, len(want)+1, []string{"ADDED solo/sentinel local@solo"})
	})

	t.Run("the reads list the resource's global namespace", func(t *testing.T) {
		t.Parallel()
		m := globalsMux(t)
		var globals, parents []string
		if _, err := m.Read(func(r watchmux.Reader) { globals, parents = r.GlobalNamespaces(), r.Parents() }); err != nil {
			t.Fatal(err)
		}
		for _, ns := range []string{global, rolesGlobal} {
			if !slices.Contains(globals, ns) {
				t.Errorf("GlobalNamespaces() = %q, want %s in it", globals, ns)
			}
		}
		for _, ns := range []string{"org", "team-a"} {
			if !slices.Contains(parents, ns) {
				t.Errorf("Parents() = %q, want %s in it", parents, ns)
			}
		}
		if !slices.IsSorted(globals) || !slices.IsSorted(parents) {
			t.Errorf("GlobalNamespaces() = %q, Parents() = %q: not sorted", globals, parents)
		}
	})
}

// reach counts the namespaces whose view of resource the edit of the source
// namespace/name into obj changes, from the reads the guards count with.
func reach(t *testing.T, m *watchmux.Mux, resource, namespace, name string, obj runtime.Object) (int, error) {
	t.Helper()
	e := watchmux.Edit{Namespace: namespace, Name: name, Item: &merge.Item{Namespace: namespace, Name: name, Object: obj}}
	n := 0
	_, err := m.Read(func(r watchmux.Reader) {
		for _, ns := range r.Reached(resource, namespace) {
			if !watchmux.SameView(r.Results(resource, ns, name), r.ResultsAfter(resource, ns, e)) {
				n++
			}
		}
	})
	return n, err
}

// describeOf is the describe part of a describeFull rendering.
func describeOf(full string) string {
	for i := 0; i+2 < len(full); i++ {
		if full[i:i+3] == " | " {
			return full[:i]
		}
	}
	return full
}

// fakeOverlayer merges overlays onto a RoleBinding by appending their
// subjects, and records each call.
type fakeOverlayer struct {
	mu    sync.Mutex
	calls []string
}

var _ merge.Overlayer = &fakeOverlayer{}

// Overlay implements merge.Overlayer.
func (f *fakeOverlayer) Overlay(base merge.Item, overlays []merge.Item) (any, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	call := base.Namespace + "/" + base.Name
	merged := base.Object.(*rbacv1.RoleBinding).DeepCopy()
	for _, o := range overlays {
		call += "+" + o.Namespace + "/" + o.Name
		merged.Subjects = append(merged.Subjects, o.Object.(*rbacv1.RoleBinding).Subjects...)
	}
	f.calls = append(f.calls, call)
	return merged, nil
}

func (f *fakeOverlayer) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// subjects lists the subject names of a merged RoleBinding.
func subjects(obj any) []string {
	rb, ok := obj.(*rbacv1.RoleBinding)
	if !ok {
		return nil
	}
	var out []string
	for _, s := range rb.Subjects {
		out = append(out, s.Name)
	}
	return out
}

// TestSetMergeOptionsOverlay checks the Overlay strategy set at run time:
// the views it changes get their events, lower-scope items of an inherited
// name overlay it, edits of an overlay
// make MODIFIED events, resyncs none, and Inherited leaves the namespace's
// own overlay out.
func TestSetMergeOptionsOverlay(t *testing.T) {
	t.Parallel()
	m := newMux(watchmux.Options{})
	g1 := roleBinding(global, "g1")
	for _, s := range with(put(rolebindings, g1), putRB("org", "g1"), putRB("team-a", "g1")) {
		s(m)
	}
	m.MarkSynced()
	ov := &fakeOverlayer{}
	f := resumeFrom(t, m, rolebindings)
	t.Log("Setting the options makes an event of every view the new merge changes: shadows become overlays")
	m.SetMergeOptions(rolebindings, merge.Options{Strategy: merge.Overlay, Overlayer: ov})
	expectEvents(t, f, 0, []string{"MODIFIED org/g1 global@" + global, "MODIFIED team-a-1/g1 global@" + global, "MODIFIED team-a/g1 global@" + global, "MODIFIED team-b/g1 global@" + global})
	before := currentRV(t, m)
	m.SetMergeOptions("configmaps", merge.Options{Strategy: merge.Overlay, Overlayer: ov}) // not served: ignored
	expectQuiet(t, m, before, "SetMergeOptions of a resource that is not served")

	read := func(ns string) overlayView {
		t.Helper()
		var res []merge.Result
		if _, err := m.Read(func(r watchmux.Reader) { res = r.Results(rolebindings, ns, "g1") }); err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 {
			t.Fatalf("%s's view of g1 = %d results, want 1", ns, len(res))
		}
		return overlayView{res[0].Scope, res[0].Item.Namespace, res[0].OverlaySources(), subjects(res[0].Object)}
	}
	tests := []struct {
		name      string
		namespace string
		want      overlayView
	}{
		{name: "the org overlays the global item", namespace: "org", want: overlayView{merge.ScopeGlobal, global, "org/g1",
			[]string{global + ":g1", "org:g1"}}},
		{name: "team-a overlays the org's overlay", namespace: "team-a", want: overlayView{merge.ScopeGlobal, global, "org/g1,team-a/g1",
			[]string{global + ":g1", "org:g1", "team-a:g1"}}},
		{name: "team-a-1 inherits team-a's", namespace: "team-a-1", want: overlayView{merge.ScopeGlobal, global, "org/g1,team-a/g1",
			[]string{global + ":g1", "org:g1", "team-a:g1"}}},
		{name: "solo has no overlay", namespace: "solo", want: overlayView{merge.ScopeGlobal, global, "", nil}},
	}
	for _, tt := range tests {
		if got := read(tt.namespace); !got.equal(tt.want) {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if calls := ov.called(); !slices.Contains(calls, global+"/g1+org/g1+team-a/g1") {
		t.Errorf("Overlayer calls = %q, want one merging team-a's overlays", calls)
	}

	t.Log("Inherited leaves the namespace's own overlay out")
	var inh, inhTeam merge.Result
	var okOrg, okTeam bool
	if _, err := m.Read(func(r watchmux.Reader) {
		inh, okOrg = r.Inherited(rolebindings, "org", "g1")
		inhTeam, okTeam = r.Inherited(rolebindings, "team-a", "g1")
	}); err != nil {
		t.Fatal(err)
	}
	if !okOrg || inh.Item.Namespace != global || len(inh.Overlays) != 0 || inh.Object != nil {
		t.Errorf("Inherited(org, g1) = %+v, %v; want the global item alone", inh, okOrg)
	}
	if !okTeam || inhTeam.OverlaySources() != "org/g1" || !slices.Equal(subjects(inhTeam.Object), []string{global + ":g1", "org:g1"}) {
		t.Errorf("Inherited(team-a, g1) = overlays %q, subjects %q, %v; want org's overlay only", inhTeam.OverlaySources(), subjects(inhTeam.Object), okTeam)
	}

	t.Log("An edit of an overlay makes MODIFIED events of the views it is merged into")
	f = resumeFrom(t, m, rolebindings)
	put(rolebindings, roleBinding("team-a", "g1"))(m)
	expectEvents(t, f, 0, []string{"MODIFIED team-a-1/g1 global@" + global, "MODIFIED team-a/g1 global@" + global})

	t.Log("A resync of the same objects makes none")
	before = currentRV(t, m)
	put(rolebindings, g1)(m)
	expectQuiet(t, m, before, "a resync of the global base")
	put(rolebindings, roleBinding("solo", "sentinel"))(m)
	expectEvents(t, f, 2, []string{"ADDED solo/sentinel local@solo"})
}

// overlayView is what one namespace's view of an overlaid item shows.
type overlayView struct {
	scope    merge.Scope
	base     string
	overlays string
	subjects []string
}

func (a overlayView) equal(b overlayView) bool {
	return a.scope == b.scope && a.base == b.base && a.overlays == b.overlays && slices.Equal(a.subjects, b.subjects)
}
