package authz_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// stage labels a namespace implicit.dev/stage.
func stage(s string) nsOpt {
	return func(ns *corev1.Namespace) { ns.Labels[v1alpha1.LabelStage] = s }
}

// candidateFor makes a source a candidate for forName, seen by selector.
func candidateFor(forName, selector string) objOpt {
	return func(m *metav1.ObjectMeta) {
		m.Annotations[v1alpha1.AnnotationCandidateFor] = forName
		m.Annotations[v1alpha1.AnnotationCanarySelector] = selector
	}
}

// stagedWorld is five tenants, two of them canaries and one in prod, and a
// global binding whose candidate adds carol for the canaries.
func stagedWorld() []runtime.Object {
	return []runtime.Object{
		namespace(global),
		namespace("t1"),
		namespace("t2", stage("canary")),
		namespace("t3"),
		namespace("t4", stage("canary")),
		namespace("t5", stage("prod")),
		roleBinding(global, "org-viewers", clusterRoleRef("view"), []rbacv1.Subject{group("viewers")}),
		roleBinding(global, "org-viewers.next", clusterRoleRef("view"), []rbacv1.Subject{group("viewers"), user("carol")},
			candidateFor("org-viewers", v1alpha1.LabelStage+"=canary")),
	}
}

// TestAuthorizeCandidate checks that a global RoleBinding's candidate
// grants its subjects exactly in the namespaces whose stage its selector
// matches, under the stable binding's name, and follows the stage labels
// and the candidate's abort, through the decision cache.
func TestAuthorizeCandidate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, stagedWorld()...)
	check := func(step string, canaries ...string) {
		t.Helper()
		for _, ns := range []string{"t1", "t2", "t3", "t4", "t5"} {
			want := false
			for _, c := range canaries {
				want = want || c == ns
			}
			// Twice: the second answer comes from the cache.
			for range 2 {
				got := f.authorize(t, podReader("carol", nil, ns))
				if got.Allowed != want {
					t.Errorf("%s: carol in %s: %+v, want allowed %v", step, ns, got, want)
				}
				if got.Allowed && !strings.Contains(got.Reason, `RoleBinding "org-viewers" (candidate org-viewers.next) inherited`) {
					t.Errorf("%s: carol in %s: reason %q, want the stable binding's name and its candidate", step, ns, got.Reason)
				}
				// The stable binding's subjects keep access everywhere.
				if got := f.authorize(t, podReader("alice", []string{"viewers"}, ns)); !got.Allowed {
					t.Errorf("%s: alice in %s: %+v, want allowed", step, ns, got)
				}
			}
		}
		// The candidate's own namespace enforces it natively: the webhook
		// has no opinion there, as for any global binding.
		if got := f.authorize(t, podReader("carol", nil, global)); got.Allowed {
			t.Errorf("%s: carol in the global namespace: %+v, want no opinion", step, got)
		}
	}
	check("staged for the canaries", "t2", "t4")
	apply(f.mux, false, namespace("t5", stage("canary")))
	check("t5 moved to canary", "t2", "t4", "t5")
	apply(f.mux, false, namespace("t2", stage("prod")))
	check("t2 moved to prod", "t4", "t5")
	apply(f.mux, false, roleBinding(global, "org-viewers.next", clusterRoleRef("view"), []rbacv1.Subject{group("viewers"), user("carol")},
		candidateFor("org-viewers", v1alpha1.LabelStage+" in (canary,prod)")))
	check("the selector widened", "t2", "t4", "t5")
	apply(f.mux, true, roleBinding(global, "org-viewers.next", clusterRoleRef("view"), nil))
	check("aborted")
}
