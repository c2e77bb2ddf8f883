package controlplane

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// WebhookClientName is the common name of the client certificate
// kube-apiserver presents to webhooks (authorization and admission): pass
// it to implicit-apiserver as --webhook-client-names (WebhookServerArgs
// does).
const WebhookClientName = "kube-apiserver-webhook-client"

// webhookClientDir holds the webhook client CA and certificate under the
// work directory. It is made before the rest of the PKI, by
// PrepareAuthorizationWebhook or Start, whichever runs first, and kept
// across both: the authorization webhook's kubeconfig is written before
// Start.
const webhookClientDir = "webhook-client"

// webhookClient is the webhook client CA and the certificate it signed.
type webhookClient struct {
	ca, client *keyPair
}

// ensureWebhookClient loads the webhook client credentials of workDir, or
// makes them when they are missing or expire within a day.
func ensureWebhookClient(workDir string) (*webhookClient, error) {
	p := &pki{dir: filepath.Join(workDir, webhookClientDir)}
	ca, caErr := loadKeyPair(p.dir, "ca")
	client, clientErr := loadKeyPair(p.dir, "client")
	if caErr == nil && clientErr == nil && fresh(ca.cert) && fresh(client.cert) && client.cert.CheckSignatureFrom(ca.cert) == nil {
		return &webhookClient{ca: ca, client: client}, nil
	}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating webhook client PKI directory: %w", err)
	}
	var err error
	w := &webhookClient{}
	if w.ca, err = p.newCA("ca", "implicit-dev-webhook-client-ca"); err != nil {
		return nil, err
	}
	if w.client, err = p.newCert("client", w.ca, certTemplate{commonName: WebhookClientName, usage: x509.ExtKeyUsageClientAuth}); err != nil {
		return nil, err
	}
	return w, nil
}

// fresh reports whether cert is valid for at least another day.
func fresh(cert *x509.Certificate) bool {
	return time.Now().Add(24 * time.Hour).Before(cert.NotAfter)
}

// loadKeyPair reads <dir>/<file>.crt and .key as sign wrote them.
func loadKeyPair(dir, file string) (*keyPair, error) {
	kp := &keyPair{certPath: filepath.Join(dir, file+".crt"), keyPath: filepath.Join(dir, file+".key")}
	var err error
	if kp.certPEM, err = os.ReadFile(kp.certPath); err != nil {
		return nil, err
	}
	if kp.keyPEM, err = os.ReadFile(kp.keyPath); err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(kp.certPEM, kp.keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", kp.certPath, err)
	}
	if kp.cert, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
		return nil, err
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New(kp.keyPath + ": not a signing key")
	}
	kp.key = signer
	return kp, nil
}

// writeAdmissionConfig writes kube-apiserver's --admission-control-config-file:
// the validating and mutating webhook plugins read a kubeconfig whose user
// "*" (every webhook host; a local aggregated server's port is not known
// when kube-apiserver starts) presents the webhook client certificate.
func writeAdmissionConfig(workDir string, w *webhookClient) (string, error) {
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate-data: %s
    client-key-data: %s
`, b64(w.client.certPEM), b64(w.client.keyPEM))
	kubeconfigPath := filepath.Join(workDir, webhookClientDir, "admission-webhooks.kubeconfig")
	if err := os.WriteFile(kubeconfigPath, []byte(kubeconfig), 0o600); err != nil {
		return "", err
	}
	config := fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]s
- name: MutatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %[1]s
`, kubeconfigPath)
	path := filepath.Join(workDir, webhookClientDir, "admission-config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// WebhookClientCAFile is the CA that signed the client certificate
// kube-apiserver presents to webhooks.
func (cp *ControlPlane) WebhookClientCAFile() string { return cp.webhookClient.ca.certPath }

// WebhookServerArgs are the implicit-apiserver flags that make its webhook
// endpoints answer this control plane's kube-apiserver (and no one else).
func (cp *ControlPlane) WebhookServerArgs() []string {
	return []string{"--webhook-client-ca-file=" + cp.WebhookClientCAFile(), "--webhook-client-names=" + WebhookClientName}
}

// WebhookClientCertificate is the client certificate kube-apiserver
// presents to webhooks, for a test that calls a webhook as kube-apiserver.
func (cp *ControlPlane) WebhookClientCertificate() (tls.Certificate, error) {
	return tls.X509KeyPair(cp.webhookClient.client.certPEM, cp.webhookClient.client.keyPEM)
}
