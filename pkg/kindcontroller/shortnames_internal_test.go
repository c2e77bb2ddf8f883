package kindcontroller

import (
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// shortNamesHost is a host whose discovery lists lists, which the test
// changes while the controller reads it.
type shortNamesHost struct {
	*fakediscovery.FakeDiscovery
	mu    sync.Mutex
	lists []*metav1.APIResourceList
}

func (h *shortNamesHost) ServerGroupsAndResources() ([]*metav1.APIGroup, []*metav1.APIResourceList, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return nil, slices.Clone(h.lists), nil
}

func (h *shortNamesHost) set(lists ...*metav1.APIResourceList) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lists = lists
}

// servedShortNames returns each served view's short names as the group was
// last given them.
func (g *fakeGroup) servedShortNames() map[string][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.shortNames
}

// TestControllerWithholdsTakenShortNames: a view's short name that another
// resource of the host has (a CRD's irb) is left out of discovery from the
// first publish, while the collision lasts, and served again once the other
// resource drops it; the views' own group never counts as another.
func TestControllerWithholdsTakenShortNames(t *testing.T) {
	t.Parallel()
	ironbars := &metav1.APIResourceList{GroupVersion: "metal.example.com/v1", APIResources: []metav1.APIResource{
		{Name: "ironbars", Kind: "IronBar", Namespaced: true, ShortNames: []string{"irb", "bar"}},
	}}
	own := &metav1.APIResourceList{GroupVersion: "implicit.dev/v1alpha1", APIResources: []metav1.APIResource{
		{Name: "roles", Kind: "Role", Namespaced: true, ShortNames: []string{"irole"}},
	}}
	host := &shortNamesHost{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}}
	host.set(ironbars, own)
	ks := kinds.BuiltIns()
	mux, objects := newMux(ks)
	group := &fakeGroup{}
	clock := clocktesting.NewFakeClock(time.Now())
	c, err := New(Config{
		Kinds:     ks,
		Informers: informers.NewSharedInformerFactory(fake.NewClientset(), 0),
		Discovery: host,
		Mux:       mux,
		Objects:   objects,
		Group:     group,
		Period:    shortNamesEvery,
		Clock:     clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	runController(t, c)
	waitFor(t, "the first publish", c.HasChecked)
	sets, _ := group.snapshot()
	if len(sets) != 1 {
		t.Errorf("%d publishes, want 1: the taken short name is withheld before the first", len(sets))
	}
	want := map[string][]string{"rolebindings": nil, "roles": {"irole"}, "networkpolicies": {"inetpol"}}
	for r, w := range want {
		if got := group.servedShortNames()[r]; !slices.Equal(got, w) {
			t.Errorf("%s.implicit.dev's short names while ironbars has irb: %v, want %v", r, got, w)
		}
	}

	t.Log("the CRD drops irb: the view serves it again at the next read")
	host.set(&metav1.APIResourceList{GroupVersion: "metal.example.com/v1", APIResources: []metav1.APIResource{
		{Name: "ironbars", Kind: "IronBar", Namespaced: true, ShortNames: []string{"bar"}},
	}}, own)
	clock.Step(shortNamesEvery)
	waitFor(t, "irb served again", func() bool {
		return slices.Equal(group.servedShortNames()["rolebindings"], []string{"irb"})
	})
}
