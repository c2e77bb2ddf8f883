package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

// The suite runs implicit-apiserver as it runs in a cluster: as the
// ServiceAccount implicit-system/implicit-apiserver with the RBAC that
// artifacts/base ships, nothing more, and with the Deployment's flags. A
// rule the server needs that the artifacts lack fails the suite here (the
// server logs "forbidden", see checkNoForbidden), not in a user's cluster.

const (
	// identityNamespace and identityServiceAccount are the Deployment's.
	identityNamespace      = "implicit-system"
	identityServiceAccount = "implicit-apiserver"
)

// identityKinds are the objects of artifacts/base that make up the server's
// identity and permissions. The rest (Deployment, Service, APIService,
// webhook configurations) the suite sets up for a server on loopback.
var identityKinds = map[string]bool{
	"Namespace": true, "ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"Role": true, "RoleBinding": true,
}

// identityManifests are applied as they are: artifacts/base's identity
// objects, and what docs/configuration.md tells users to apply for a
// configured kind (read access to its source, aggregated into the server's
// role).
var identityManifests = []string{"artifacts/config/guardrails/clusterrole.yaml"}

// deploymentIdentity applies the shipped identity and RBAC, and writes a
// kubeconfig that authenticates as the ServiceAccount with a bound token,
// as a pod's projected token does.
func deploymentIdentity(ctx context.Context, cp *controlplane.ControlPlane) (string, error) {
	rendered, _, err := cp.Kubectl(ctx, "kustomize", filepath.Join(repoRoot, "artifacts/base"))
	if err != nil {
		return "", fmt.Errorf("rendering artifacts/base: %w", err)
	}
	var keep []string
	for _, doc := range strings.Split(rendered, "\n---\n") {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			return "", fmt.Errorf("reading artifacts/base: %w", err)
		}
		if !identityKinds[meta.Kind] {
			continue
		}
		keep = append(keep, doc)
		if meta.Kind == "ClusterRole" && meta.Metadata.Name == identityServiceAccount {
			local, err := localWebhookRole(doc)
			if err != nil {
				return "", err
			}
			keep = append(keep, local...)
		}
	}
	for _, path := range identityManifests {
		b, err := os.ReadFile(filepath.Join(repoRoot, path))
		if err != nil {
			return "", err
		}
		keep = append(keep, string(b))
	}
	if _, _, err := cp.KubectlWithInput(ctx, bytes.NewBufferString(strings.Join(keep, "\n---\n")), "apply", "-f", "-"); err != nil {
		return "", fmt.Errorf("applying the shipped RBAC: %w", err)
	}

	kube, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		return "", err
	}
	expiry := int64((48 * time.Hour).Seconds())
	tr, err := kube.CoreV1().ServiceAccounts(identityNamespace).CreateToken(ctx, identityServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token for %s/%s: %w", identityNamespace, identityServiceAccount, err)
	}
	admin := cp.AdminConfig()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["host"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	cfg.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["sa"] = &clientcmdapi.Context{Cluster: "host", AuthInfo: "sa"}
	cfg.CurrentContext = "sa"
	path := filepath.Join(cp.WorkDir(), "implicit-apiserver-sa.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	return path, nil
}

// localWebhookRole returns a ClusterRole and its binding to the server's
// ServiceAccount that repeat the shipped ClusterRole's rules on the
// webhook configuration it names (resourceNames implicit-apiserver) for the
// suite's own webhook configuration, controlplane.GuardsConfiguration,
// which has another name so that artifacts/base can be applied with
// --dry-run=server beside it. The verbs are the shipped ones: a verb the
// artifacts lack is missing here too.
func localWebhookRole(shipped string) ([]string, error) {
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal([]byte(shipped), &role); err != nil {
		return nil, err
	}
	local := rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: "implicit-apiserver-suite-webhook-configuration"},
	}
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, "admissionregistration.k8s.io") && slices.Contains(r.ResourceNames, identityServiceAccount) {
			r.ResourceNames = []string{controlplane.GuardsConfiguration}
			local.Rules = append(local.Rules, r)
		}
	}
	if len(local.Rules) == 0 {
		return nil, fmt.Errorf("the shipped ClusterRole %s has no rule on its webhook configuration", role.Name)
	}
	binding := rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: local.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: local.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: identityNamespace, Name: identityServiceAccount}},
	}
	var out []string
	for _, obj := range []any{local, binding} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, string(b))
	}
	return out, nil
}

// identityArgs are the flags that make the server use the ServiceAccount's
// kubeconfig where a pod uses its in-cluster configuration, and know its
// namespace as the Deployment's downward API tells it.
func identityArgs(kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--pod-namespace=" + identityNamespace,
	}
}

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
