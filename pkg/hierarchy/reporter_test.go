package hierarchy_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/hierarchy"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// namingRecorder is a record.FakeRecorder whose events also name the
// object they were recorded on and the namespace the Event goes to, as
// client-go's recorder places it: the reference's namespace, "default" for
// a cluster-scoped object.
type namingRecorder struct{ *record.FakeRecorder }

func (r namingRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	name, where := "<unknown>", ""
	if ref, ok := obj.(*corev1.ObjectReference); ok {
		name, where = ref.Name, ref.Namespace
	} else if m, err := meta.Accessor(obj); err == nil {
		name, where = m.GetName(), m.GetNamespace()
	}
	if where == "" {
		where = metav1.NamespaceDefault
	}
	r.FakeRecorder.Event(obj, eventtype, reason, name+" in "+where+": "+message)
}

// event is what the reporter records, through namingRecorder, for p: an
// Event in the namespace it is about (issue 27), where its tenants look.
func event(p merge.Problem) string {
	return fmt.Sprintf("%s Hierarchy%s %s in %s: %s", corev1.EventTypeWarning, p.Reason, p.Namespace, p.Namespace, p.String())
}

// hierarchyGauge reads implicit_hierarchy_problem_namespaces by reason from
// the legacy registry; and the deprecated implicit_hierarchy_errors, which
// must read the same, else it returns what that reads.
func hierarchyGauge(t *testing.T) map[string]float64 {
	t.Helper()
	got, old := hierarchyGaugeNamed(t, "implicit_hierarchy_problem_namespaces"), hierarchyGaugeNamed(t, "implicit_hierarchy_errors")
	if fmt.Sprint(got) != fmt.Sprint(old) {
		return map[string]float64{"deprecated implicit_hierarchy_errors differs: " + fmt.Sprint(old): 0}
	}
	return got
}

// waitForGauge waits until implicit_hierarchy_problem_namespaces reads want.
func waitForGauge(t *testing.T, want map[string]float64) {
	t.Helper()
	testwait.Within(t, 10*time.Millisecond, testwait.Timeout, fmt.Sprintf("implicit_hierarchy_problem_namespaces = %v", want), func(context.Context) error {
		if got := hierarchyGauge(t); fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("it reads %v", got)
		}
		return nil
	})
}

func hierarchyGaugeNamed(t *testing.T, name string) map[string]float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

// TestReporter drives the reporter through a fake clientset. It is
// not parallel: it reads the process-wide implicit_hierarchy_problem_namespaces gauge and
// checks for goroutine leaks while no other test runs.
func TestReporter(t *testing.T) {
	defer goleak.VerifyNone(t)

	client := fake.NewClientset(
		namespace(global),
		namespace("fine"),
		namespace("a", parent("b")),
		namespace("b", parent("a")),
		namespace("below-a", parent("a")),
		namespace("c", parent("nope")),
		namespace("d", parent("d")),
		namespace("e", parent(global)),
		namespace("kube-system"),
		namespace("g", parent("kube-system")),
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	reporter, err := hierarchy.NewReporter(policy(), factory.Core().V1().Namespaces())
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

	// next returns the next n events, sorted.
	next := func(t *testing.T, n int) []string {
		t.Helper()
		var got []string
		timeout := time.After(wait.ForeverTestTimeout)
		for len(got) < n {
			select {
			case e := <-recorder.Events:
				got = append(got, e)
			case <-timeout:
				t.Fatalf("got events %q, want %d", got, n)
			}
		}
		sort.Strings(got)
		return got
	}
	waitGauge := waitForGauge
	update := func(t *testing.T, ns *corev1.Namespace) {
		t.Helper()
		if _, err := client.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("updating namespace %s: %v", ns.Name, err)
		}
	}

	t.Log("Every problem is reported once, on the namespace carrying the offending label")
	want := []string{
		event(merge.Problem{Reason: merge.ProblemCycle, Namespace: "a", Parent: "b", Cycle: []string{"b", "a"}}),
		event(merge.Problem{Reason: merge.ProblemCycle, Namespace: "b", Parent: "a", Cycle: []string{"a", "b"}}),
		event(merge.Problem{Reason: merge.ProblemInvalidParent, Namespace: "d", Parent: "d"}),
		event(merge.Problem{Reason: merge.ProblemInvalidParent, Namespace: "e", Parent: global}),
		event(merge.Problem{Reason: merge.ProblemInvalidParent, Namespace: "g", Parent: "kube-system"}),
		event(merge.Problem{Reason: merge.ProblemMissingParent, Namespace: "c", Parent: "nope"}),
	}
	sort.Strings(want)
	if got := next(t, len(want)); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	waitGauge(t, map[string]float64{"Cycle": 2, "MissingParent": 1, "InvalidParent": 3, "DepthExceeded": 0, "ParentUIDMismatch": 0})

	t.Log("Fixing problems records nothing; known problems are not reported again")
	if _, err := client.CoreV1().Namespaces().Create(ctx, namespace("nope"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	update(t, namespace("b"))
	waitGauge(t, map[string]float64{"Cycle": 0, "MissingParent": 0, "InvalidParent": 3, "DepthExceeded": 0, "ParentUIDMismatch": 0})
	if _, err := client.CoreV1().Namespaces().Create(ctx, namespace("f", parent("missing-f")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The worker handles events in order: any repeat would come first.
	want = []string{event(merge.Problem{Reason: merge.ProblemMissingParent, Namespace: "f", Parent: "missing-f"})}
	if got := next(t, 1); got[0] != want[0] {
		t.Fatalf("event = %q, want %q (and no repeat of a known problem)", got[0], want[0])
	}
	waitGauge(t, map[string]float64{"Cycle": 0, "MissingParent": 1, "InvalidParent": 3, "DepthExceeded": 0, "ParentUIDMismatch": 0})

	t.Log("A problem that comes back is reported again")
	if err := client.CoreV1().Namespaces().Delete(ctx, "nope", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want = []string{event(merge.Problem{Reason: merge.ProblemMissingParent, Namespace: "c", Parent: "nope"})}
	if got := next(t, 1); got[0] != want[0] {
		t.Fatalf("event = %q, want %q", got[0], want[0])
	}
	waitGauge(t, map[string]float64{"Cycle": 0, "MissingParent": 2, "InvalidParent": 3, "DepthExceeded": 0, "ParentUIDMismatch": 0})

	t.Log("Run returns once its context is cancelled")
	cancel()
	select {
	case <-done:
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("Run did not return after its context was cancelled")
	}
	select {
	case e := <-recorder.Events:
		t.Errorf("unexpected event %q", e)
	default:
	}
}

// TestReporterWithoutRecorder checks that a nil recorder is allowed:
// problems are still counted.
func TestReporterWithoutRecorder(t *testing.T) {
	defer goleak.VerifyNone(t)

	client := fake.NewClientset(namespace("a", parent("missing")))
	factory := informers.NewSharedInformerFactory(client, 0)
	reporter, err := hierarchy.NewReporter(policy(), factory.Core().V1().Namespaces())
	if err != nil {
		t.Fatalf("NewReporter: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	factory.Start(ctx.Done())
	go func() {
		defer close(done)
		reporter.Run(ctx, nil)
	}()
	// The gauge is process-wide: wait for exactly this cluster's counts.
	want := map[string]float64{"Cycle": 0, "MissingParent": 1, "InvalidParent": 0, "DepthExceeded": 0, "ParentUIDMismatch": 0}
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return fmt.Sprint(hierarchyGauge(t)) == fmt.Sprint(want), nil
	})
	cancel()
	<-done
	factory.Shutdown()
	if err != nil {
		t.Fatalf("the missing parent was never counted: %v", err)
	}
}
