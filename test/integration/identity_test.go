package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

// The suite runs implicit-apiserver as it runs in a cluster: as the
// ServiceAccount implicit-system/implicit-apiserver with the RBAC that
// artifacts/base ships, nothing more, and with the Deployment's flags. A
// rule the server needs that the artifacts lack fails the suite here (the
// server logs "forbidden", see checkNoForbidden), not in a user's cluster.

// identityNamespace and identityServiceAccount are the Deployment's.
const (
	identityNamespace      = controlplane.IdentityNamespace
	identityServiceAccount = controlplane.IdentityServiceAccount
)

// identityManifests are applied as they are beside artifacts/base's
// identity objects: what docs/configuration.md tells users to apply for a
// configured kind (read access to its source, aggregated into the server's
// role).
var identityManifests = []string{"artifacts/config/guardrails/clusterrole.yaml"}

// deploymentIdentity applies the shipped identity and RBAC, and returns a
// kubeconfig that authenticates as the ServiceAccount with a bound token,
// as a pod's projected token does (controlplane.ApplyServerIdentity, which
// make run uses too).
func deploymentIdentity(ctx context.Context, cp *controlplane.ControlPlane) (string, error) {
	var extra []string
	for _, path := range identityManifests {
		extra = append(extra, filepath.Join(repoRoot, path))
	}
	id, err := cp.ApplyServerIdentity(ctx, filepath.Join(repoRoot, "artifacts/base"), extra...)
	if err != nil {
		return "", err
	}
	return id.Kubeconfig, nil
}

// identityArgs are the flags that make the server use the ServiceAccount's
// kubeconfig where a pod uses its in-cluster configuration, and know its
// namespace as the Deployment's downward API tells it.
func identityArgs(kubeconfig string) []string { return controlplane.IdentityArgs(kubeconfig) }

// checkNoForbidden reports the server's log lines where the host refused it
// something: a permission the shipped RBAC lacks.
func checkNoForbidden(logPath string) error {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return err
	}
	var bad []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "forbidden") && strings.Contains(line, "system:serviceaccount:"+identityNamespace+":"+identityServiceAccount) {
			bad = append(bad, line)
		}
	}
	if len(bad) > 0 {
		if len(bad) > 10 {
			bad = append(bad[:10], fmt.Sprintf("... and %d more", len(bad)-10))
		}
		return fmt.Errorf("the host refused implicit-apiserver's ServiceAccount %d times: the shipped RBAC lacks a rule:\n%s", len(bad), strings.Join(bad, "\n"))
	}
	return nil
}
