package answers_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tf "github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestExplainMessages (issue 27): a namespace that does not exist has no
// explanation (NotFound, as kube-apiserver answers); a candidate is
// explained as what it stages; a lock's conflict reads once, not "a lock
// blocked shadow ... blocked".
func TestExplainMessages(t *testing.T) {
	t.Parallel()
	candidate := func(m *metav1.ObjectMeta) {
		m.Annotations[v1alpha1.AnnotationCandidateFor] = "g-open"
		m.Annotations[v1alpha1.AnnotationCanarySelector] = v1alpha1.LabelStage + "=canary"
	}
	canary := func(ns *corev1.Namespace) { ns.Labels[v1alpha1.LabelStage] = "canary" }
	m := answersOf(t, true, append(questionsWorld(),
		tf.AddNamespace(tf.Namespace("team-b", tf.Parent("org"), canary)),
		putRB(global, "g-open.next", candidate),
	))

	if _, err := m.Explain(rbResource, "nosuch-ns", "g-open"); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `namespaces "nosuch-ns" not found`) {
		t.Errorf("a namespace that does not exist: %v, want NotFound of the namespace", err)
	}

	st, err := m.Explain(rbResource, "team-b", "g-open.next")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"the source implicit-global/g-open.next is a candidate for implicit-global/g-open", "kubectl implicit why rolebindings g-open -n team-b"} {
		if st.InView || !strings.Contains(st.Summary, want) {
			t.Errorf("a candidate: in view %v, summary %q lacks %q", st.InView, st.Summary, want)
		}
	}

	st, err = m.Explain(rbResource, "team-a-1", "g-lock")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(st.Summary, "a lock blocked shadow") || !strings.Contains(st.Summary, "; shadow by local team-a-1/g-lock blocked: ") {
		t.Errorf("a lock's conflict: summary %q", st.Summary)
	}
}
