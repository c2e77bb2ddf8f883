package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// apExample is the staged admission-policy example (docs/policies.md).
var apExample = filepath.Join(repoRoot, "artifacts/config/admission-policies")

// apStaged is issue 29's second point: the example's one policy and two
// bindings (Audit and Warn everywhere, Deny for the canaries), then a
// candidate of the parameter for the canaries, its widening, its promotion
// and enforcement for everyone, each step checked per namespace: a denial
// where enforcing, a warning (and an audit annotation) where auditing,
// nothing elsewhere.
func apStaged(t *testing.T, c *policyCluster) {
	c.namespace(t, "st-canary", map[string]string{v1alpha1.LabelStage: "canary"}, nil)
	c.namespace(t, "st-early", map[string]string{v1alpha1.LabelStage: "early"}, nil)
	c.namespace(t, "st-main", nil, nil)
	applyFile := func(name string) {
		t.Helper()
		c.kubectl(t, "apply", "-f", filepath.Join(apExample, name))
	}
	t.Cleanup(func() {
		// The policy matches every namespace: the later subtests' must not
		// meet it.
		for _, args := range [][]string{
			{"delete", "validatingadmissionpolicybinding", "replica-limit-audit", "replica-limit-deny", "--ignore-not-found"},
			{"delete", "validatingadmissionpolicy", "replica-limit", "--ignore-not-found"},
			{"delete", "configmap", "-n", globalNS, "replica-limit", "replica-limit.next", "--ignore-not-found"},
		} {
			_, _, _ = c.cp.Kubectl(context.Background(), args...)
		}
	})
	for _, f := range []string{"policy.yaml", "binding-audit.yaml", "binding-deny-canary.yaml", "parameter.yaml"} {
		applyFile(f)
	}
	all := []string{"st-canary", "st-early", "st-main"}

	t.Log("the global limit is 10: nothing over it is admitted in the canary, warned elsewhere")
	c.want(t, "st-canary", 11, "denied: replicas 11 over the limit 10 inherited by st-canary")
	c.want(t, "st-early", 11, "warned: replicas 11 over the limit 10")
	c.want(t, "st-main", 11, "warned: replicas 11 over the limit 10")
	for _, ns := range all {
		c.want(t, ns, 4, "admitted")
	}

	t.Log("step 1, a candidate of 3 for the canaries: enforced there, nothing elsewhere")
	applyFile("steps/1-candidate.yaml")
	c.want(t, "st-canary", 4, "denied: over the limit 3")
	c.want(t, "st-early", 4, "admitted")
	c.want(t, "st-main", 4, "admitted")
	t.Log("kubectl implicit policies names the parameter each namespace is enforced with: the canary's candidate")
	plugin := pluginUser{t: t, name: "admin", path: buildPlugin(t), kubeconfig: c.cp.KubeconfigPath(), home: t.TempDir()}
	for ns, want := range map[string]string{"st-canary": "configmaps/replica-limit.next", "st-main": "configmaps/replica-limit "} {
		plugin.expect(0, func(r pluginRun) error {
			if !strings.Contains(r.stdout, want) {
				return errorf("%s: no parameter %q", ns, want)
			}
			return nil
		}, "policies", "-n", ns)
	}

	t.Log("step 2, widened to the early namespaces: audited and warned there")
	applyFile("steps/2-widen.yaml")
	c.want(t, "st-early", 4, "warned: over the limit 3")
	c.want(t, "st-canary", 4, "denied: over the limit 3")
	c.want(t, "st-main", 4, "admitted")
	eventually(t, "the audit log records st-early's validation failure", func(context.Context) error {
		got, err := c.auditAnnotations("st-early", "validation_failure")
		if err != nil {
			return err
		}
		for _, a := range got {
			if strings.Contains(a, "replica-limit-audit") && strings.Contains(a, "over the limit 3") {
				t.Logf("audit annotation: %s", a)
				return nil
			}
		}
		return errorf("none naming replica-limit-audit among %v", got)
	})

	t.Log("step 3, promotion: 3 for everyone, warned everywhere, denied in the canary")
	applyFile("steps/3-promote.yaml")
	c.kubectl(t, "delete", "configmap", "-n", globalNS, "replica-limit.next")
	c.want(t, "st-main", 4, "warned: over the limit 3")
	c.want(t, "st-early", 4, "warned: over the limit 3")
	c.want(t, "st-canary", 4, "denied: over the limit 3")

	t.Log("step 4, enforce everyone")
	applyFile("steps/4-enforce-everyone.yaml")
	for _, ns := range all {
		c.want(t, ns, 4, "denied: over the limit 3")
		c.want(t, ns, 3, "admitted")
	}
}
