package integration

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestPolicyReviews: kubectl implicit policies -n NS, run by a namespace
// admin who may not read the cluster's admission policies, lists through a
// PolicyReview the ValidatingAdmissionPolicy whose paramKind is the
// ConfigMap view, the bindings that select the namespace with the action
// each takes there, and the parameter the namespace inherits with where it
// comes from; a namespace that excludes the parameter is exempt, and a
// binding that does not select the namespace is not named. Its own control
// plane (policies_cluster_test.go), which serves ConfigMaps as views.
func TestPolicyReviews(t *testing.T) {
	c := startPolicyCluster(t)
	c.namespace(t, "pr-org", map[string]string{"pr-suite": "x", "pr-stage": "canary"}, nil)
	c.namespace(t, "pr-team", map[string]string{"pr-suite": "x", v1alpha1.LabelParent: "pr-org"}, nil)
	c.namespace(t, "pr-x", map[string]string{"pr-suite": "x"}, map[string]string{v1alpha1.AnnotationExclude: "configmaps/pr-limits"})
	c.apply(t, apReplicasPolicy("pr-replicas", "ConfigMap", "int(params.data.maxReplicas)", "Fail"))
	c.apply(t, apBinding("pr-warn", "pr-replicas", "pr-limits", "Allow", "pr-suite=x", "Warn"))
	c.apply(t, apBinding("pr-deny", "pr-replicas", "pr-limits", "Deny", "pr-stage=canary", "Deny"))
	c.apply(t, apLimitsConfigMap(globalNS, "pr-limits", 3, false))
	c.apply(t, apLimitsConfigMap("pr-org", "pr-limits", 2, false))
	// dana is admin of pr-team alone, and may ask the review and list the
	// ConfigMap view there (a real install aggregates both into admin).
	c.apply(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pr-questions, namespace: pr-team}
rules:
- apiGroups: [implicit.dev]
  resources: [policyreviews]
  verbs: [create]
- apiGroups: [implicit.dev]
  resources: [configmaps]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: dana-admin, namespace: pr-team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: dana}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: dana-questions, namespace: pr-team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pr-questions}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: dana}]
`)
	if out, _, err := c.cp.Kubectl(t.Context(), "auth", "can-i", "list", "validatingadmissionpolicies", "--as", "dana"); err == nil {
		t.Fatalf("dana may list ValidatingAdmissionPolicies: %s", out)
	}
	u := pluginUser{t: t, name: "dana", path: buildPlugin(t), kubeconfig: c.cp.KubeconfigPath(), home: t.TempDir()}
	matches := func(res ...string) func(pluginRun) error {
		return func(r pluginRun) error {
			for _, re := range res {
				if !regexp.MustCompile(re).MatchString(r.stdout) {
					return fmt.Errorf("no line matching %s", re)
				}
			}
			return nil
		}
	}
	t.Log("pr-team inherits pr-org's limit; the canary binding does not select it")
	r := u.expect(0, matches(
		`(?m)^POLICY\s+KIND\s+BINDING\s+ACTION\s+PARAM\s+SOURCE$`,
		`(?m)^pr-replicas\s+Validating\s+pr-warn\s+Warn\s+configmaps/pr-limits\s+parent pr-org$`,
	), "policies", "-n", "pr-team", "--as", "dana")
	if regexp.MustCompile(`pr-deny`).MatchString(r.stdout) {
		t.Errorf("pr-team's review names the canary binding:\n%s", r.stdout)
	}
	c.want(t, "pr-team", 3, "warned: over the limit 2 of pr-team/pr-limits")

	t.Log("dana may not ask about pr-org: an error, exit 1 as kubectl")
	u.expect(1, func(r pluginRun) error {
		if !regexp.MustCompile(`(?i)forbidden`).MatchString(r.stderr) {
			return fmt.Errorf("not forbidden: %s", r.stderr)
		}
		return nil
	}, "policies", "-n", "pr-org", "--as", "dana")

	t.Log("as admin: pr-org is a canary (Deny, its own limit); pr-x excludes the parameter (exempt)")
	adm := pluginUser{t: t, name: "admin", path: u.path, kubeconfig: c.cp.KubeconfigPath(), home: t.TempDir()}
	adm.expect(0, matches(
		`(?m)^pr-replicas\s+Validating\s+pr-deny\s+Deny\s+configmaps/pr-limits\s+local pr-org$`,
		`(?m)^pr-replicas\s+Validating\s+pr-warn\s+Warn\s+configmaps/pr-limits\s+local pr-org$`,
	), "policies", "-n", "pr-org")
	adm.expect(0, matches(`(?m)^pr-replicas\s+Validating\s+pr-warn\s+exempt\s+configmaps/pr-limits\s+<none>$`), "policies", "-n", "pr-x")
	var review v1alpha1.PolicyReview
	adm.expect(0, func(r pluginRun) error { return decode(r, &review) }, "policies", "-n", "pr-x", "-o", "json")
	if p := review.Status.Policies; len(p) != 1 || len(p[0].Bindings) != 1 || p[0].Bindings[0].Action != v1alpha1.PolicyActionExempt {
		t.Errorf("pr-x's review: %+v", review.Status)
	}
	c.want(t, "pr-x", 9, "admitted")
}
