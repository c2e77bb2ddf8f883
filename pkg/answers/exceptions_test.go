package answers_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tf "github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

func withExceptions(specs []v1alpha1.ExceptionSpec, approvals map[string]v1alpha1.ExceptionApproval, expired map[string]string) tf.NamespaceOpt {
	return func(ns *corev1.Namespace) {
		if ns.Annotations == nil {
			ns.Annotations = map[string]string{}
		}
		b, _ := json.Marshal(specs)
		ns.Annotations[v1alpha1.AnnotationExceptions] = string(b)
		if approvals != nil {
			b, _ = json.Marshal(approvals)
			ns.Annotations[v1alpha1.AnnotationExceptionApprovals] = string(b)
		}
		if expired != nil {
			b, _ = json.Marshal(expired)
			ns.Annotations[v1alpha1.AnnotationExceptionsExpired] = string(b)
		}
	}
}

func needsApprovalRule(m *metav1.ObjectMeta) {
	m.Annotations[v1alpha1.AnnotationExceptionApproval] = "required"
}

// TestQuestionExceptions: a namespace's list holds its own exceptions and
// its ancestors', each in the namespace declaring it; all namespaces'
// holds every one; states are read from the marks and the views: Expired
// once marked, Requested while an item it names needs an approval this
// version lacks (approved for another version does not count), Active.
func TestQuestionExceptions(t *testing.T) {
	t.Parallel()
	ends := &metav1.Time{Time: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	spec := func(name string, exclude ...string) v1alpha1.ExceptionSpec {
		return v1alpha1.ExceptionSpec{Name: name, Exclude: exclude, Reason: "T-1", RequestedBy: "alice", ExpiresAt: ends}
	}
	open, gated, stale, old := spec("open", "rolebindings/g-open"), spec("gated", "rolebindings/*"), spec("stale", "rolebindings/g-gated"), spec("old", "rolebindings/o-x")
	approvedOther := v1alpha1.ExceptionApproval{By: "bob", Digest: "not-this-version", Sources: []string{global}}
	m := answersOf(t, true, append(tf.Hierarchy(),
		tf.AddNamespace(tf.Namespace("org", withExceptions([]v1alpha1.ExceptionSpec{old}, nil, map[string]string{"old": merge.ExceptionDigest(old)}))),
		tf.AddNamespace(tf.Namespace("team-a", tf.Parent("org"), withExceptions([]v1alpha1.ExceptionSpec{open, gated, stale},
			map[string]v1alpha1.ExceptionApproval{"stale": approvedOther}, nil))),
		putRB(global, "g-open"),
		putRB(global, "g-gated", needsApprovalRule),
		putRB("org", "o-x"),
	))

	type row struct{ Namespace, Name, State string }
	rows := func(ns string) ([]row, []v1alpha1.Exception) {
		t.Helper()
		got, err := m.Exceptions(ns)
		if err != nil {
			t.Fatalf("Exceptions(%q): %v", ns, err)
		}
		var out []row
		for _, e := range got {
			out = append(out, row{e.Namespace, e.Name, e.Status.State})
		}
		return out, got
	}
	wantTeamA := []row{{"org", "old", "Expired"}, {"team-a", "gated", "Requested"}, {"team-a", "open", "Active"}, {"team-a", "stale", "Requested"}}
	for _, ns := range []string{"team-a-1", ""} {
		got, items := rows(ns)
		if !reflect.DeepEqual(got, wantTeamA) {
			t.Errorf("Exceptions(%q) = %v, want %v", ns, got, wantTeamA)
		}
		for _, e := range items {
			if e.Name == "gated" && !reflect.DeepEqual(e.Status.NeedsApproval, []string{"rolebindings " + global + "/g-gated"}) {
				t.Errorf("gated needs approval for %v", e.Status.NeedsApproval)
			}
			if e.Name == "stale" && e.Status.Approval != nil {
				t.Errorf("stale carries the approval of another version: %+v", e.Status.Approval)
			}
		}
	}
	if got, _ := rows("team-b"); !reflect.DeepEqual(got, []row{{"org", "old", "Expired"}}) {
		t.Errorf("team-b (org's child) lists %v, want org's only", got)
	}
	if got, _ := rows("solo"); len(got) != 0 {
		t.Errorf("solo lists %v, want none", got)
	}
	// The writer's gauge asks one exception's state: the same.
	for _, e := range merge.ExceptionsOf(merge.NamespaceOf(mustNamespace(t, "team-a", open, gated, stale))) {
		want := map[string]string{"open": "Active", "gated": "Requested", "stale": "Requested"}[e.Name]
		if got := m.ExceptionState("team-a", e); got != want {
			t.Errorf("ExceptionState(team-a, %s) = %s, want %s", e.Name, got, want)
		}
	}
	if _, err := m.Exceptions("nowhere"); err == nil {
		t.Error("Exceptions(nowhere): no error")
	}
}

// mustNamespace is a namespace declaring specs, as ExceptionsOf reads it.
func mustNamespace(t *testing.T, name string, specs ...v1alpha1.ExceptionSpec) *corev1.Namespace {
	t.Helper()
	ns := tf.Namespace(name)
	withExceptions(specs, nil, nil)(ns)
	return ns
}
