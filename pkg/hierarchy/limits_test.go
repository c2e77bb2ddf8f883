package hierarchy_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/implicit-dev/implicit-apiserver/pkg/hierarchy"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// TestReporterLimits checks that DepthExceeded and
// ParentUIDMismatch are reported like the other reasons: in the gauge and as
// a Warning Event on the namespace concerned. It is not parallel: it reads
// the process-wide implicit_hierarchy_problem_namespaces gauge.
func TestReporterLimits(t *testing.T) {
	defer goleak.VerifyNone(t)

	p := policy()
	p.MaxDepth = 2
	client := fake.NewClientset(
		namespace("n0"),
		namespace("n1", parent("n0")),
		namespace("n2", parent("n1")),
		namespace("n3", parent("n2")),
		namespace("org"), // uid ns-org
		namespace("team", parent("org"), parentUID("org-before-it-was-deleted")),
		namespace("fine", parent("org"), parentUID("ns-org")),
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	reporter, err := hierarchy.NewReporter(p, factory.Core().V1().Namespaces())
	if err != nil {
		t.Fatalf("NewReporter: %v", err)
	}
	recorder := record.NewFakeRecorder(100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	defer func() {
		cancel()
		<-done
		factory.Shutdown()
	}()
	factory.Start(ctx.Done())
	go func() {
		defer close(done)
		reporter.Run(ctx, namingRecorder{recorder})
	}()

	t.Log("n3 is 3 levels deep with a cap of 2; team records another uid than org's")
	want := []string{
		event(merge.Problem{Reason: merge.ProblemDepthExceeded, Namespace: "n3", Parent: "n0", MaxDepth: 2}),
		event(merge.Problem{Reason: merge.ProblemParentUIDMismatch, Namespace: "team", Parent: "org",
			RecordedUID: "org-before-it-was-deleted", ParentUID: "ns-org"}),
	}
	sort.Strings(want)
	var got []string
	timeout := time.After(wait.ForeverTestTimeout)
	for len(got) < len(want) {
		select {
		case e := <-recorder.Events:
			got = append(got, e)
		case <-timeout:
			t.Fatalf("got events %q, want %q", got, want)
		}
	}
	sort.Strings(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	waitGauge := func(want map[string]float64) {
		t.Helper()
		waitForGauge(t, want)
	}
	waitGauge(map[string]float64{"Cycle": 0, "MissingParent": 0, "InvalidParent": 0, "DepthExceeded": 1, "ParentUIDMismatch": 1})

	t.Log("Recording org's uid on team and cutting n3 loose clear both")
	for _, ns := range []*corev1.Namespace{namespace("team", parent("org"), parentUID("ns-org")), namespace("n3")} {
		if _, err := client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("updating namespace %s: %v", ns.Name, err)
		}
	}
	waitGauge(map[string]float64{"Cycle": 0, "MissingParent": 0, "InvalidParent": 0, "DepthExceeded": 0, "ParentUIDMismatch": 0})
}
