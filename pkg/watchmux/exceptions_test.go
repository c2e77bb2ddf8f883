package watchmux_test

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// TestExceptionEvents: an exception, its approval and its expiry mark are
// namespace changes, and each moves the views of the namespace and its
// subtree by one event per item: issue 42's "one event per affected view"
// at expiry, and nothing for a view the change does not move.
func TestExceptionEvents(t *testing.T) {
	spec := v1alpha1.ExceptionSpec{Name: "waiver", Exclude: []string{"rolebindings/g1"}, Reason: "TICKET-1", RequestedBy: "alice"}
	annotate := func(key string, v any) func(*corev1.Namespace) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return func(ns *corev1.Namespace) { ns.Annotations[key] = string(b) }
	}
	requested := annotate(v1alpha1.AnnotationExceptions, []v1alpha1.ExceptionSpec{spec})
	approved := annotate(v1alpha1.AnnotationExceptionApprovals, map[string]v1alpha1.ExceptionApproval{
		spec.Name: {By: "bob", Digest: merge.ExceptionDigest(spec), Sources: []string{global}}})
	expired := annotate(v1alpha1.AnnotationExceptionsExpired, map[string]string{spec.Name: merge.ExceptionDigest(spec)})

	requiresApproval := func(m *metav1.ObjectMeta) { m.Annotations[v1alpha1.AnnotationExceptionApproval] = "required" }
	m := newMux(watchmux.Options{})
	for _, s := range []step{addNS(namespace(global)), putRB(global, "g1", requiresApproval), putRB(global, "g2"),
		addNS(namespace("org")), addNS(namespace("team-a", parent("org"))), addNS(namespace("team-b", parent("org")))} {
		s(m)
	}
	m.MarkSynced()
	f := resumeFrom(t, m, rolebindings)

	// Requested: g1's source requires approval, so g1 stays, its view
	// items saying which exclusion was blocked (implicit.dev/conflict).
	addNS(namespace("org", requested))(m)
	expectEvents(t, f, 0, []string{
		"MODIFIED org/g1 global@implicit-global conflict",
		"MODIFIED team-a/g1 global@implicit-global conflict",
		"MODIFIED team-b/g1 global@implicit-global conflict",
	})
	// Approved: g1 leaves org's view and its subtree's, one DELETED each.
	addNS(namespace("org", requested, approved))(m)
	expectEvents(t, f, 3, []string{
		"DELETED org/g1 global@implicit-global conflict",
		"DELETED team-a/g1 global@implicit-global conflict",
		"DELETED team-b/g1 global@implicit-global conflict",
	})
	// The approval's own annotation written again unchanged, g2 untouched:
	// no event.
	before := currentRV(t, m)
	addNS(namespace("org", requested, approved))(m)
	expectQuiet(t, m, before, "the namespace written again as it was")
	// Marked expired by the server: g1 back in each, one ADDED each.
	addNS(namespace("org", requested, approved, expired))(m)
	expectEvents(t, f, 6, []string{
		"ADDED org/g1 global@implicit-global",
		"ADDED team-a/g1 global@implicit-global",
		"ADDED team-b/g1 global@implicit-global",
	})
}
