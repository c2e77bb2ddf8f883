package admission_test

import (
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
)

// TestSharedRecordLaggingMirror: replica A admits c -> a, its mirror shows
// it land, then A admits c: a -> b. Replica B's mirror lags further: it
// still shows c without a parent. The record's entry for c (c -> b, which
// replaced c -> a) must still count on B, which can't tell a mirror
// behind the change's old version from one past it: b -> c closes the
// cycle b -> c -> b, as one replica would refuse. Likewise when A created
// c with the parent a and B's mirror does not hold c yet.
func TestSharedRecordLaggingMirror(t *testing.T) {
	t.Parallel()
	for _, created := range []bool{false, true} {
		t.Run(map[bool]string{false: "c relabelled", true: "c created"}[created], func(t *testing.T) {
			t.Parallel()
			testSharedRecordLaggingMirror(t, created)
		})
	}
}

func testSharedRecordLaggingMirror(t *testing.T, created bool) {
	update := admissionv1.Update
	nsList := []*corev1.Namespace{ns(global, ""), ns("a", ""), ns("b", "")}
	if !created {
		nsList = append(nsList, ns("c", ""))
	}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	l := &memLedger{}
	answers := allowAll(updateNamespace("a"), updateNamespace("b"), updateNamespace("c"))
	replica := func() (*admission.Guards, func(*corev1.Namespace)) {
		m := hierarchyMux(t, nsList)
		g := admission.NewGuards(admission.Config{Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{answers: answers},
			Served: served, GlobalNamespaces: []string{global}, Namespaces: namespaceClient("a", "b", "c"), Clock: clk, Ledger: l})
		return g, func(n *corev1.Namespace) {
			n = n.DeepCopy()
			n.ResourceVersion = testfixture.NextResourceVersion()
			m.OnNamespace(n, false)
		}
	}
	a, showA := replica()
	b, _ := replica()

	x0 := request(update, nsGR, "", "c", ns("c", ""), ns("c", "a", recorded))
	if created {
		x0 = request(admissionv1.Create, nsGR, "", "c", nil, ns("c", "a", recorded))
	}
	if resp, _ := review(t, a, webhookconfig.PathParents, x0); resp == nil || !resp.Allowed {
		t.Fatalf("A refused c -> a: %+v", resp)
	}
	showA(ns("c", "a", recorded))
	clk.SetTime(clk.Now().Add(time.Second))
	x1 := request(update, nsGR, "", "c", ns("c", "a", recorded), ns("c", "b", recorded))
	if resp, _ := review(t, a, webhookconfig.PathParents, x1); resp == nil || !resp.Allowed {
		t.Fatalf("A refused c: a -> b: %+v", resp)
	}
	clk.SetTime(clk.Now().Add(time.Second))
	y := request(update, nsGR, "", "b", ns("b", ""), ns("b", "c", recorded))
	resp, _ := review(t, b, webhookconfig.PathParents, y)
	if resp == nil {
		t.Fatal("no answer")
	}
	if resp.Allowed {
		t.Fatalf("B admitted b -> c while A had admitted c -> b a moment ago: the cycle b -> c -> b")
	}
	t.Logf("B refused: %s", resp.Result.Message)
}

// TestSharedRecordClockSkew: replica A's clock runs 5 s ahead of B's (or
// reads the same instant). A admits c -> a; B then admits c: a -> b, over
// it. The record keeps the later of two changes of one namespace: B's,
// though A's entry ends later (as late) by A's clock. Either replica then
// refuses b -> c (the cycle b -> c -> b) while neither mirror shows c's
// changes.
func TestSharedRecordClockSkew(t *testing.T) {
	t.Parallel()
	for _, skew := range []time.Duration{0, 5 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			t.Parallel()
			testSharedRecordClockSkew(t, skew)
		})
	}
}

func testSharedRecordClockSkew(t *testing.T, skew time.Duration) {
	update := admissionv1.Update
	nsList := []*corev1.Namespace{ns(global, ""), ns("a", ""), ns("b", ""), ns("c", "")}
	start := time.Now()
	l := &memLedger{}
	answers := allowAll(updateNamespace("a"), updateNamespace("b"), updateNamespace("c"))
	replica := func(clk *clocktesting.FakePassiveClock) *admission.Guards {
		return admission.NewGuards(admission.Config{Mirror: admission.MirrorOf(whatif.New(hierarchyMux(t, nsList))), Authorizer: &fakeAuthorizer{answers: answers},
			Served: served, GlobalNamespaces: []string{global}, Namespaces: namespaceClient("a", "b", "c"), Clock: clk, Ledger: l})
	}
	a, b := replica(clocktesting.NewFakePassiveClock(start.Add(skew))), replica(clocktesting.NewFakePassiveClock(start))

	x0 := request(update, nsGR, "", "c", ns("c", ""), ns("c", "a", recorded))
	if resp, _ := review(t, a, webhookconfig.PathParents, x0); resp == nil || !resp.Allowed {
		t.Fatalf("A refused c -> a: %+v", resp)
	}
	x1 := request(update, nsGR, "", "c", ns("c", "a", recorded), ns("c", "b", recorded))
	if resp, _ := review(t, b, webhookconfig.PathParents, x1); resp == nil || !resp.Allowed {
		t.Fatalf("B refused c: a -> b: %+v", resp)
	}
	for _, r := range []struct {
		name string
		g    *admission.Guards
	}{{"A", a}, {"B", b}} {
		y := request(update, nsGR, "", "b", ns("b", ""), ns("b", "c", recorded))
		y.UID += types.UID(r.name)
		resp, _ := review(t, r.g, webhookconfig.PathParents, y)
		if resp == nil {
			t.Fatal("no answer")
		}
		if resp.Allowed {
			t.Errorf("%s admitted b -> c while B had admitted c -> b a moment ago: the cycle b -> c -> b", r.name)
			continue
		}
		t.Logf("%s refused: %s", r.name, resp.Result.Message)
	}
}
