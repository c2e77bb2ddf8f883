package answers_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	tf "github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestHierarchyNotTenant: a hierarchy says why a namespace is no tenant, so
// that tree tells the global namespace from those that opted out.
func TestHierarchyNotTenant(t *testing.T) {
	t.Parallel()
	optOut := func(ns *corev1.Namespace) { ns.Labels[v1alpha1.LabelInherit] = "false" }
	m := answersOf(t, true, append(questionsWorld(), tf.AddNamespace(tf.Namespace("legacy", optOut))))
	for ns, want := range map[string]string{
		global: v1alpha1.NotTenantGlobal, "legacy": v1alpha1.NotTenantOptedOut, "kube-system": v1alpha1.NotTenantExcluded, "team-a": "",
	} {
		h, ok, err := m.Hierarchy(ns)
		if err != nil || !ok || h.NotTenant != want || h.Tenant != (want == "") {
			t.Errorf("%s: tenant %v, not a tenant %q, %v, %v; want %q", ns, h.Tenant, h.NotTenant, ok, err, want)
		}
	}
}
