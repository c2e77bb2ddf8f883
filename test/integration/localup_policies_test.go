package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestLocalUpAdmissionPolicy runs local-up as `IMPLICIT_CONFIG=
// artifacts/config/admission-policies/config.yaml make run` does: it
// serves ConfigMaps' views and applies the example admission policy with
// its [Audit, Warn] binding only. The tour's tenant (platform:admins,
// admin of team-a through org-platform) reads the inherited parameter and
// is warned, not refused, over it.
func TestLocalUpAdmissionPolicy(t *testing.T) {
	path := buildPlugin(t)
	work, stop := runLocalUp(t, "artifacts/config/admission-policies/config.yaml")
	defer stop()

	u := pluginUser{t: t, name: "pat", path: path, kubeconfig: filepath.Join(work, "admin.kubeconfig"), home: t.TempDir()}
	asAdmin := []string{"--as=pat", "--as-group=platform:admins"}
	t.Log("the tenant reads the parameter team-a inherits")
	u.expectKubectl(0, func(r pluginRun) error {
		if !strings.Contains(r.stdout, `maxReplicas: "10"`) || !strings.Contains(r.stdout, "implicit.dev/scope: global") {
			return fmt.Errorf("no global maxReplicas 10")
		}
		return nil
	}, append([]string{"get", "configmaps.implicit.dev", "replica-limit", "-n", "team-a", "-o", "yaml"}, asAdmin...)...)

	t.Log("... and is warned, not refused, over it")
	u.expectKubectl(0, func(r pluginRun) error {
		if want := "Warning: Validation failed for ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-audit': replicas 11 over the limit 10 inherited by team-a"; !strings.Contains(r.stderr, want) {
			return fmt.Errorf("stderr %q: want %q", r.stderr, want)
		}
		return nil
	}, append([]string{"create", "deployment", "web", "-n", "team-a", "--image=registry.k8s.io/pause:3.10", "--replicas=11", "--dry-run=server"}, asAdmin...)...)
}
