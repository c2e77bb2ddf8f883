package controlplane

import (
	"crypto/x509"
	"os"
	"strings"
	"testing"
)

// TestEnsureWebhookClient: the webhook client credentials are made once per
// work directory and found again (PrepareAuthorizationWebhook runs before
// Start, and both need the same), and the client certificate verifies
// against the CA for client authentication.
func TestEnsureWebhookClient(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := ensureWebhookClient(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ensureWebhookClient(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !again.client.cert.Equal(first.client.cert) || !again.ca.cert.Equal(first.ca.cert) {
		t.Error("a second ensureWebhookClient made new credentials instead of loading the first")
	}
	roots := x509.NewCertPool()
	roots.AddCert(first.ca.cert)
	if _, err := first.client.cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the client certificate does not verify against the CA: %v", err)
	}
	if cn := first.client.cert.Subject.CommonName; cn != WebhookClientName {
		t.Errorf("client certificate CN %q, want %q", cn, WebhookClientName)
	}

	path, err := writeAdmissionConfig(dir, first)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook", "kind: WebhookAdmissionConfiguration"} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("admission configuration lacks %q:\n%s", want, cfg)
		}
	}
}
