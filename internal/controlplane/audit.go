package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// AuditArgs writes, in dir, an audit policy that records the requests for
// the given resources at the Metadata level (the level that keeps the
// annotations admission adds, such as a ValidatingAdmissionPolicy's Audit
// action) and nothing else, and returns kube-apiserver's flags for it (pass
// them in Options.KubeAPIServerArgs) with the path of the audit log. The
// log backend blocks: an event is written before kube-apiserver goes on.
func AuditArgs(dir string, resources ...schema.GroupResource) (args []string, logPath string, err error) {
	if len(resources) == 0 {
		return nil, "", fmt.Errorf("controlplane: AuditArgs needs at least one resource")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	var b strings.Builder
	b.WriteString("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n  resources:\n")
	for _, r := range resources {
		fmt.Fprintf(&b, "  - group: %q\n    resources: [%q]\n", r.Group, r.Resource)
	}
	b.WriteString("- level: None\n")
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(b.String()), 0o600); err != nil {
		return nil, "", err
	}
	logPath = filepath.Join(dir, "audit.log")
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + logPath,
		"--audit-log-mode=blocking",
		"--audit-log-format=json",
	}, logPath, nil
}
