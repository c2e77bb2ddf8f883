package watchmux

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// TestCandidateGauges checks implicit_candidates and
// implicit_candidate_namespaces through a rollout: set when the mux syncs,
// then kept up to date by source and namespace changes.
func TestCandidateGauges(t *testing.T) {
	t.Parallel()
	// A resource of its own: the gauges are process-wide, by resource.
	const resource = "gauged-rolebindings"
	m := New(merge.Policy{GlobalNamespace: global}, []string{resource}, itemObjects{}, Options{})
	ns := func(name, stage string) *corev1.Namespace {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("ns-" + name), Labels: map[string]string{}}}
		if stage != "" {
			n.Labels[v1alpha1.LabelStage] = stage
		}
		return n
	}
	rb := func(name string, annotations map[string]string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{
			Namespace: global, Name: name, UID: types.UID("uid-" + name), ResourceVersion: name, Annotations: annotations,
		}}
	}
	next := func() *rbacv1.RoleBinding {
		return rb("g.next", map[string]string{v1alpha1.AnnotationCandidateFor: "g", v1alpha1.AnnotationCanarySelector: v1alpha1.LabelStage + "=canary"})
	}
	check := func(step string, wantCandidates, wantNamespaces float64) {
		t.Helper()
		c, err := testutil.GetGaugeMetricValue(candidates.WithLabelValues(resource))
		if err != nil {
			t.Fatal(err)
		}
		n, err := testutil.GetGaugeMetricValue(candidateNamespaces.WithLabelValues(resource))
		if err != nil {
			t.Fatal(err)
		}
		if c != wantCandidates || n != wantNamespaces {
			t.Errorf("%s: implicit_candidates %v, implicit_candidate_namespaces %v; want %v and %v", step, c, n, wantCandidates, wantNamespaces)
		}
	}
	for _, n := range []*corev1.Namespace{ns(global, ""), ns("a", "canary"), ns("b", ""), ns("c", "canary")} {
		m.OnNamespace(n, false)
	}
	m.OnSource(resource, rb("g", nil), false)
	m.OnSource(resource, next(), false)
	// A malformed candidate is one too, reaching no namespace.
	m.OnSource(resource, rb("bad", map[string]string{v1alpha1.AnnotationCandidateFor: "h", v1alpha1.AnnotationCanarySelector: "team=a"}), false)
	m.MarkSynced()
	check("synced", 2, 2)
	m.OnNamespace(ns("c", "prod"), false)
	check("c moved to prod", 2, 1)
	m.OnSource(resource, rb("g.next", nil), true)
	check("aborted", 1, 0)
	m.OnSource(resource, next(), false)
	check("staged again", 2, 1)
	m.OnNamespace(ns("b", "canary"), false)
	check("b moved to canary", 2, 2)
	m.OnNamespace(ns("a", "canary"), true)
	check("a deleted", 2, 1)
	m.OnSource(resource, rb("bad", nil), false)
	check("the malformed candidate made an ordinary source", 1, 1)
}
