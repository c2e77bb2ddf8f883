package kindcontroller

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/servedgroup"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// fakeGroup records what the controller serves.
type fakeGroup struct {
	mu sync.Mutex
	// sets are the resources of each Set, sorted.
	sets [][]string
	// schemas are the resources whose schemas were set, in order.
	schemas []string
	// columns are the printer column names of each kind of the last Set.
	columns map[string][]string
	// shortNames are each view's short names in the last Set.
	shortNames map[string][]string
}

func (g *fakeGroup) SetSchemas(k kinds.Kind, _ servedgroup.HostSchemas) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.schemas = append(g.schemas, k.Resource())
}

func (g *fakeGroup) Set(views []servedgroup.View) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	var resources []string
	for _, v := range views {
		if v.Storage == nil {
			panic("no storage of " + v.Kind.Resource())
		}
		resources = append(resources, v.Kind.Resource())
	}
	slices.Sort(resources)
	g.sets = append(g.sets, resources)
	g.columns = map[string][]string{}
	g.shortNames = map[string][]string{}
	for _, v := range views {
		if sn, ok := v.Storage.(rest.ShortNamesProvider); ok {
			g.shortNames[v.Kind.Resource()] = sn.ShortNames()
		}
		for _, c := range v.Kind.Columns {
			g.columns[v.Kind.Resource()] = append(g.columns[v.Kind.Resource()], c.Name)
		}
	}
	return nil
}

// snapshot returns every Set's resources and the schemas set so far.
func (g *fakeGroup) snapshot() (sets [][]string, schemas []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.sets), slices.Clone(g.schemas)
}

func (g *fakeGroup) last() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.sets) == 0 {
		return nil
	}
	return g.sets[len(g.sets)-1]
}

// newMux returns a mux and its objects serving the typed kinds of ks.
func newMux(ks []kinds.Kind) (*watchmux.Mux, *views.Objects) {
	newObject := map[string]func() runtime.Object{}
	var resources []string
	for _, k := range kinds.Typed(ks) {
		newObject[k.Resource()] = k.New
		resources = append(resources, k.Resource())
	}
	objects := views.NewObjects(newObject, 0)
	return watchmux.New(merge.Policy{GlobalNamespace: "global"}, resources, objects, watchmux.Options{}), objects
}

// runController runs c until the test ends.
func runController(t *testing.T, c *Controller) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// waitFor polls cond on the real clock: it says when something the
// controller does in its own goroutines has happened.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, what, cond)
}

// TestControllerServesBuiltInKindsAtOnce: the built-in kinds are fed to the
// mux when the controller is made and served at its first publish, with no
// host to ask.
func TestControllerServesBuiltInKindsAtOnce(t *testing.T) {
	t.Parallel()
	ks := kinds.BuiltIns()
	mux, objects := newMux(ks)
	group := &fakeGroup{}
	c, err := New(Config{
		Kinds:     ks,
		Informers: informers.NewSharedInformerFactory(fake.NewClientset(), 0),
		Mux:       mux,
		Objects:   objects,
		Group:     group,
		Period:    time.Second,
		Clock:     clocktesting.NewFakeClock(time.Now()),
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.HasChecked() {
		t.Error("checked before running")
	}
	runController(t, c)
	waitFor(t, "the first publish", c.HasChecked)
	if want := []string{"networkpolicies", "rolebindings", "roles"}; !slices.Equal(group.last(), want) {
		t.Errorf("served %v, want %v", group.last(), want)
	}
	if !c.HasChecked() {
		t.Error("not checked with only built-in kinds")
	}
	if _, schemas := group.snapshot(); len(schemas) != 0 {
		t.Errorf("schemas set for %v: the built-in kinds' are the group's from the start", schemas)
	}
}

// TestControllerNeedsHostClient: kinds that are not built in can't be
// served without a host to find them on.
func TestControllerNeedsHostClient(t *testing.T) {
	t.Parallel()
	ks := []kinds.Kind{{Source: guardrails, Strategy: merge.Replace}}
	mux, objects := newMux(ks)
	_, err := New(Config{Kinds: ks, Mux: mux, Objects: objects, Group: &fakeGroup{}, Period: time.Second, Clock: clocktesting.NewFakeClock(time.Now())})
	if err == nil || !strings.Contains(err.Error(), "need a host cluster client") || !strings.Contains(err.Error(), guardrails.String()) {
		t.Errorf("err = %v, want one naming %s and the missing client", err, guardrails)
	}
}

// TestControllerPollsOnTheClock: a kind the host does not serve is asked
// about once at start and again at each tick of the injected clock.
func TestControllerPollsOnTheClock(t *testing.T) {
	t.Parallel()
	widgets := schema.GroupVersionResource{Group: "poll.example.com", Version: "v1", Resource: "widgets"}
	ks := []kinds.Kind{{Source: widgets, Strategy: merge.Replace}}
	mux, objects := newMux(ks)
	host := &clienttesting.Fake{}
	clock := clocktesting.NewFakeClock(time.Now())
	c, err := New(Config{
		Kinds: ks,
		// The reads of the host's short names are not counted.
		Discovery: &shortNamesHost{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: host}},
		Dynamic:   dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()),
		Mux:       mux,
		Objects:   objects,
		Group:     &fakeGroup{},
		Period:    time.Minute,
		Clock:     clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	runController(t, c)
	waitFor(t, "the first poll", c.HasChecked)
	if got := len(host.Actions()); got != 1 {
		t.Fatalf("%d discovery requests after the first poll, want 1", got)
	}
	clock.Step(time.Minute)
	waitFor(t, "the poll of the next tick", func() bool { return len(host.Actions()) == 2 })
	clock.Step(time.Minute)
	waitFor(t, "the poll of the tick after", func() bool { return len(host.Actions()) == 3 })
}

// TestControllerServesFoundKind: a kind the host serves is fed to the mux
// pending, served once its informer has synced, with its schemas given to
// the group and the guards told.
func TestControllerServesFoundKind(t *testing.T) {
	t.Parallel()
	served := &metav1.APIResourceList{GroupVersion: "policy.example.com/v1", APIResources: []metav1.APIResource{guardrailResource(nil)}}
	dc := fakeHost{resources: served, indexed: true, doc: guardrailDocument(t, map[string]string{guardrailModel: guardrailSchema})}.start(t)
	guardrail := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "policy.example.com/v1", "kind": "Guardrail",
		"metadata": map[string]any{"name": "strict", "namespace": "global", "resourceVersion": "1"},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		crdResource: "CustomResourceDefinitionList",
		guardrails:  "GuardrailList",
	}, guardrailCRD(), guardrail)

	ks := append(kinds.BuiltIns(), kinds.Kind{Source: guardrails, Strategy: merge.Overlay})
	mux, objects := newMux(ks)
	group := &fakeGroup{}
	var mu sync.Mutex
	var told []schema.GroupResource
	c, err := New(Config{
		Kinds:     ks,
		Informers: informers.NewSharedInformerFactory(fake.NewClientset(), 0),
		Discovery: dc,
		Dynamic:   dyn,
		Mux:       mux,
		Objects:   objects,
		Group:     group,
		Period:    time.Minute,
		Clock:     clocktesting.NewFakeClock(time.Now()),
		OnServe: func(gr schema.GroupResource) {
			mu.Lock()
			defer mu.Unlock()
			told = append(told, gr)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runController(t, c)
	waitFor(t, "the kinds found at start to be served", c.HasChecked)
	if want := []string{"guardrails", "networkpolicies", "rolebindings", "roles"}; !slices.Equal(group.last(), want) {
		t.Errorf("served %v, want %v", group.last(), want)
	}
	sets, schemas := group.snapshot()
	if slices.Contains(sets[0], "guardrails") {
		t.Errorf("first publish %v serves guardrails before its informer synced", sets[0])
	}
	if want := []string{"guardrails"}; !slices.Equal(schemas, want) {
		t.Errorf("schemas set for %v, want %v", schemas, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []schema.GroupResource{guardrails.GroupResource()}; !slices.Equal(told, want) {
		t.Errorf("guards told of %v, want %v", told, want)
	}
}
