package kindcontroller

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// TestColumnsSurviveCRDWindow (issue 27): the view of a custom resource
// kept its CRD's printer columns only as long as every poll found the CRD.
// A poll between the CRD's deletion and the host's discovery and OpenAPI
// dropping the kind (a CRD deleted and created again, as a test or a
// GitOps sync does) read "no CRD" as "no columns" and served the view
// without them; the view itself never stops answering, so whoever asked
// right after the CRD came back saw no ACTION column until the next poll.
// The ordering is made here deterministically: served with its CRD, then a
// poll with the kind listed and the CRD gone, then the CRD back.
func TestColumnsSurviveCRDWindow(t *testing.T) {
	t.Parallel()
	served := &metav1.APIResourceList{GroupVersion: "policy.example.com/v1", APIResources: []metav1.APIResource{guardrailResource(nil)}}
	dc := fakeHost{resources: served, indexed: true, doc: guardrailDocument(t, map[string]string{guardrailModel: guardrailSchema})}.start(t)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		crdResource: "CustomResourceDefinitionList",
		guardrails:  "GuardrailList",
	}, guardrailCRD())
	ks := append(kinds.BuiltIns(), kinds.Kind{Source: guardrails, Strategy: merge.Replace})
	mux, objects := newMux(ks)
	group := &fakeGroup{}
	clock := clocktesting.NewFakeClock(time.Now())
	c, err := New(Config{
		Kinds: ks, Informers: informers.NewSharedInformerFactory(fake.NewClientset(), 0),
		Discovery: dc, Dynamic: dyn, Mux: mux, Objects: objects, Group: group,
		Period: time.Minute, Clock: clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	columns := func() []string {
		group.mu.Lock()
		defer group.mu.Unlock()
		return slices.Clone(group.columns["guardrails"])
	}
	sets := func() int {
		group.mu.Lock()
		defer group.mu.Unlock()
		return len(group.sets)
	}
	runController(t, c)
	waitFor(t, "guardrails served", func() bool { return slices.Contains(group.last(), "guardrails") })
	want := columns()
	if !slices.Contains(want, "Mode") {
		t.Fatalf("served with columns %v, want the CRD's (Mode, ...)", want)
	}

	t.Log("the CRD is deleted; the host still lists the kind: a poll")
	if err := dyn.Resource(crdResource).Delete(context.Background(), "guardrails.policy.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	before := sets()
	// A poll reads the CRD once; whatever it publishes comes before the
	// next poll's read: two reads more, and the first poll is done.
	crdReads := func() int {
		n := 0
		for _, a := range dyn.Actions() {
			if a.GetVerb() == "get" && a.GetResource() == crdResource {
				n++
			}
		}
		return n
	}
	polls := crdReads()
	clock.Step(time.Minute)
	waitFor(t, "the poll to read the CRD", func() bool { return crdReads() > polls })
	clock.Step(time.Minute)
	waitFor(t, "the next poll", func() bool { return crdReads() > polls+1 })
	if got := columns(); !slices.Equal(got, want) || sets() != before {
		t.Fatalf("after a poll that found no CRD: columns %v (%d publishes after %d), want %v kept and nothing republished", got, sets(), before, want)
	}

	t.Log("the CRD is back")
	if _, err := dyn.Resource(crdResource).Create(context.Background(), guardrailCRD(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clock.Step(time.Minute)
	waitFor(t, "the poll after the CRD is back", func() bool { return crdReads() > polls+2 })
	clock.Step(time.Minute)
	waitFor(t, "the next poll", func() bool { return crdReads() > polls+3 })
	if got := columns(); !slices.Equal(got, want) {
		t.Errorf("columns %v once the CRD is back, want %v", got, want)
	}
}
