package controlplane

import (
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/implicit-dev/implicit-apiserver/internal/selfsign"
)

// AuthorizationWebhook is an aggregated server's authorization webhook,
// prepared before the control plane starts: kube-apiserver reads its
// structured authorization configuration at start-up, so the webhook's port
// and serving certificate must be known then.
type AuthorizationWebhook struct {
	// Port is the aggregated server's secure port: start it on it
	// (AggregatedServerOptions.Port), with the same Name.
	Port int
	// KubeAPIServerArgs configure kube-apiserver: pass them in
	// Options.KubeAPIServerArgs.
	KubeAPIServerArgs []string
	// ConfigPath is the AuthorizationConfiguration written.
	ConfigPath string
}

// PrepareAuthorizationWebhook writes, under workDir, a self-signed serving
// certificate into the certificate directory StartAggregated will give the
// server called name (it serves with it), a kubeconfig for calling its
// webhook at path on a free port with the webhook client certificate (the
// one Start gives kube-apiserver for admission webhooks too), and an
// AuthorizationConfiguration with
// Node and RBAC first, then the webhook with failure policy NoOpinion and
// matchCondition. Pass the same workDir to Start.
func PrepareAuthorizationWebhook(workDir, name, path, matchCondition string) (*AuthorizationWebhook, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(workDir, name, "certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	// ECDSA, as the server would make it itself (pkg/cmd/server): the
	// handshakes of kube-apiserver's proxy connections cost what they cost
	// in a real deployment, not RSA signatures.
	crt, key, err := selfsign.ECDSA("localhost", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, time.Now())
	if err != nil {
		return nil, fmt.Errorf("generating %s's serving certificate: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(certDir, "apiserver.crt"), crt, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(certDir, "apiserver.key"), key, 0o600); err != nil {
		return nil, err
	}
	// kube-apiserver calls the webhook with the webhook client certificate
	// (WebhookServerArgs makes the server require it); the CA data is the
	// server's self-signed chain.
	client, err := ensureWebhookClient(workDir)
	if err != nil {
		return nil, err
	}
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: https://127.0.0.1:%[2]d%[3]s
    certificate-authority-data: %[4]s
users:
- name: kube-apiserver
  user:
    client-certificate-data: %[5]s
    client-key-data: %[6]s
contexts:
- name: %[1]s
  context: {cluster: %[1]s, user: kube-apiserver}
current-context: %[1]s
`, name, port, path, b64(crt), b64(client.client.certPEM), b64(client.client.keyPEM))
	kubeconfigPath := filepath.Join(workDir, name+"-authz-webhook.kubeconfig")
	if err := os.WriteFile(kubeconfigPath, []byte(kubeconfig), 0o600); err != nil {
		return nil, err
	}
	config := fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Node
  name: node
- type: RBAC
  name: rbac
- type: Webhook
  name: %[1]s
  webhook:
    timeout: 3s
    subjectAccessReviewVersion: v1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: NoOpinion
    authorizedTTL: 1s
    unauthorizedTTL: 1s
    connectionInfo:
      type: KubeConfigFile
      kubeConfigFile: %[2]s
    matchConditions:
    - expression: %[3]q
`, name, kubeconfigPath, matchCondition)
	configPath := filepath.Join(workDir, name+"-authorization-config.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		return nil, err
	}
	return &AuthorizationWebhook{
		Port:              port,
		KubeAPIServerArgs: []string{"--authorization-config=" + configPath},
		ConfigPath:        configPath,
	}, nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
