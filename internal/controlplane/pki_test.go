package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"slices"
	"testing"
)

func TestPKI(t *testing.T) {
	t.Parallel()
	p, err := newPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		leaf    *keyPair
		ca      *keyPair
		usage   x509.ExtKeyUsage
		cn      string
		orgs    []string
		dnsName string
	}{
		{name: "serving", leaf: p.apiserver, ca: p.serverCA, usage: x509.ExtKeyUsageServerAuth, cn: "kube-apiserver", dnsName: "localhost"},
		{name: "serving by IP", leaf: p.apiserver, ca: p.serverCA, usage: x509.ExtKeyUsageServerAuth, cn: "kube-apiserver", dnsName: "127.0.0.1"},
		{name: "admin", leaf: p.admin, ca: p.clientCA, usage: x509.ExtKeyUsageClientAuth, cn: "admin", orgs: []string{"system:masters"}},
		{name: "front proxy", leaf: p.frontProxyClient, ca: p.frontProxyCA, usage: x509.ExtKeyUsageClientAuth, cn: "front-proxy-client"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// What kube-apiserver reads is what is on disk.
			if _, err := tls.LoadX509KeyPair(tt.leaf.certPath, tt.leaf.keyPath); err != nil {
				t.Fatalf("loading key pair: %v", err)
			}
			caPEM, err := os.ReadFile(tt.ca.certPath)
			if err != nil {
				t.Fatal(err)
			}
			roots := x509.NewCertPool()
			if !roots.AppendCertsFromPEM(caPEM) {
				t.Fatal("no CA certificate in", tt.ca.certPath)
			}
			opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{tt.usage}, DNSName: tt.dnsName}
			if _, err := tt.leaf.cert.Verify(opts); err != nil {
				t.Errorf("verify: %v", err)
			}
			if got := tt.leaf.cert.Subject.CommonName; got != tt.cn {
				t.Errorf("CN = %q, want %q", got, tt.cn)
			}
			if got := tt.leaf.cert.Subject.Organization; !slices.Equal(got, tt.orgs) {
				t.Errorf("O = %q, want %q", got, tt.orgs)
			}
		})
	}

	t.Run("certificates of one CA do not verify with another", func(t *testing.T) {
		t.Parallel()
		roots := x509.NewCertPool()
		roots.AddCert(p.clientCA.cert)
		opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if _, err := p.frontProxyClient.cert.Verify(opts); err == nil {
			t.Error("front-proxy client certificate verifies with the client CA; the CAs must be distinct")
		}
	})

	t.Run("service-account keys", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{p.serviceAccountKeyPath, p.serviceAccountPubKeyPath} {
			if info, err := os.Stat(path); err != nil || info.Size() == 0 {
				t.Errorf("%s: %v", path, err)
			}
		}
	})
}
