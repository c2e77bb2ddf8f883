package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spf13/pflag"
	genericoptions "k8s.io/apiserver/pkg/server/options"
)

// servingOptions returns the secure serving options of NewOptions after
// parsing args, as the command does.
func servingOptions(t *testing.T, args ...string) *genericoptions.SecureServingOptions {
	t.Helper()
	o := NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return o.Recommended.SecureServing.SecureServingOptions
}

// selfSign runs maybeSelfSign with the arguments Options.Config gives it.
func selfSign(t *testing.T, s *genericoptions.SecureServingOptions) {
	t.Helper()
	if err := maybeSelfSign(s, "localhost", []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		t.Fatalf("maybeSelfSign: %v", err)
	}
}

// parseCerts returns the certificates of a PEM file's content.
func parseCerts(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return certs
		}
		if block.Type != "CERTIFICATE" {
			t.Fatalf("PEM block %q in the certificate file", block.Type)
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
}

// checkPair checks a generated pair: an ECDSA P-256 key, the serving
// certificate for names and ips followed by its CA, both ECDSA.
func checkPair(t *testing.T, certPEM, keyPEM []byte, names []string, ips []string) {
	t.Helper()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatalf("the generated pair does not load: %v", err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		t.Fatalf("the generated key is a %T, want *ecdsa.PrivateKey", pair.PrivateKey)
	}
	if key.Curve != elliptic.P256() {
		t.Errorf("the generated key's curve is %s, want P-256", key.Curve.Params().Name)
	}
	certs := parseCerts(t, certPEM)
	if len(certs) != 2 {
		t.Fatalf("the certificate file holds %d certificates, want the serving one then its CA", len(certs))
	}
	serving, ca := certs[0], certs[1]
	if serving.IsCA || !ca.IsCA {
		t.Errorf("IsCA: serving %v, CA %v; want false, true", serving.IsCA, ca.IsCA)
	}
	for _, c := range certs {
		if c.PublicKeyAlgorithm != x509.ECDSA || c.SignatureAlgorithm != x509.ECDSAWithSHA256 {
			t.Errorf("%s: key %s signed with %s, want ECDSA signed with ECDSA-SHA256", c.Subject.CommonName, c.PublicKeyAlgorithm, c.SignatureAlgorithm)
		}
	}
	if err := serving.CheckSignatureFrom(ca); err != nil {
		t.Errorf("the serving certificate is not signed by the CA that follows it: %v", err)
	}
	if !slices.Contains(serving.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Errorf("ExtKeyUsage = %v, want server auth", serving.ExtKeyUsage)
	}
	for _, n := range names {
		if err := serving.VerifyHostname(n); err != nil {
			t.Errorf("name %s: %v", n, err)
		}
	}
	for _, ip := range ips {
		if err := serving.VerifyHostname(ip); err != nil {
			t.Errorf("IP %s: %v", ip, err)
		}
	}
}

// handshake serves pair on 127.0.0.1 and connects with bundle as the
// only trusted roots, as kube-apiserver does with an APIService's
// caBundle, to serverName ("" verifies the IP). It returns the error of
// the client's handshake.
func handshake(t *testing.T, pair tls.Certificate, bundle []byte, serverName string) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_ = c.(*tls.Conn).Handshake()
		_ = c.Close()
	}()
	defer func() {
		_ = ln.Close()
		<-done
	}()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatal("the bundle holds no certificate")
	}
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	defer c.Close()
	if alg := c.ConnectionState().PeerCertificates[0].PublicKeyAlgorithm; alg != x509.ECDSA {
		t.Errorf("the server presented a %s certificate, want ECDSA", alg)
	}
	return nil
}

func TestSelfSignWritesECDSAPairInCertDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "certs") // created by maybeSelfSign
	for _, tc := range []struct {
		name  string
		bind  string
		names []string
		ips   []string
	}{
		{name: "unspecified bind address", bind: "0.0.0.0", names: []string{"localhost"}, ips: []string{"127.0.0.1"}},
		{name: "bind address", bind: "10.1.2.3", names: []string{"localhost"}, ips: []string{"127.0.0.1", "10.1.2.3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			certDir := filepath.Join(dir, tc.bind)
			s := servingOptions(t, "--cert-dir="+certDir, "--bind-address="+tc.bind)
			selfSign(t, s)
			certFile, keyFile := filepath.Join(certDir, "apiserver.crt"), filepath.Join(certDir, "apiserver.key")
			if s.ServerCert.CertKey.CertFile != certFile || s.ServerCert.CertKey.KeyFile != keyFile {
				t.Fatalf("serving %s and %s, want %s and %s", s.ServerCert.CertKey.CertFile, s.ServerCert.CertKey.KeyFile, certFile, keyFile)
			}
			if s.ServerCert.GeneratedCert != nil {
				t.Errorf("an in-memory certificate besides the files")
			}
			for file, mode := range map[string]os.FileMode{certFile: 0o644, keyFile: 0o600} {
				fi, err := os.Stat(file)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != mode {
					t.Errorf("%s has mode %v, want %v", file, fi.Mode().Perm(), mode)
				}
			}
			certPEM, err := os.ReadFile(certFile)
			if err != nil {
				t.Fatal(err)
			}
			keyPEM, err := os.ReadFile(keyFile)
			if err != nil {
				t.Fatal(err)
			}
			checkPair(t, certPEM, keyPEM, tc.names, tc.ips)

			// The certificate file is the trust bundle a client is given
			// (an APIService's or a webhook's caBundle).
			pair, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				t.Fatal(err)
			}
			for _, serverName := range []string{"localhost", ""} {
				if err := handshake(t, pair, certPEM, serverName); err != nil {
					t.Errorf("handshake to %q trusting the certificate file: %v", serverName, err)
				}
			}
			// Only the CA is needed (the serving certificate is not its
			// own trust anchor).
			if err := handshake(t, pair, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: parseCerts(t, certPEM)[1].Raw}), "localhost"); err != nil {
				t.Errorf("handshake trusting the CA alone: %v", err)
			}
		})
	}
}

func TestSelfSignReusesReadablePair(t *testing.T) {
	t.Parallel()
	certDir := t.TempDir()
	s := servingOptions(t, "--cert-dir="+certDir)
	selfSign(t, s)
	certFile, keyFile := s.ServerCert.CertKey.CertFile, s.ServerCert.CertKey.KeyFile
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}

	// A restart with the same cert dir serves the same pair.
	again := servingOptions(t, "--cert-dir="+certDir)
	selfSign(t, again)
	if again.ServerCert.CertKey.CertFile != certFile || again.ServerCert.CertKey.KeyFile != keyFile {
		t.Errorf("serving %s and %s after a restart, want %s and %s", again.ServerCert.CertKey.CertFile, again.ServerCert.CertKey.KeyFile, certFile, keyFile)
	}
	for file, want := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s was rewritten; a readable pair is reused", file)
		}
	}

	// A pair of which one file is missing is an error, as
	// k8s.io/apiserver's.
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	if err := maybeSelfSign(servingOptions(t, "--cert-dir="+certDir), "localhost", nil); err == nil {
		t.Errorf("no error with %s and without %s", certFile, keyFile)
	}
}

func TestSelfSignInMemoryWithoutCertDir(t *testing.T) {
	t.Parallel()
	s := servingOptions(t, "--cert-dir=")
	selfSign(t, s)
	if s.ServerCert.CertKey.CertFile != "" || s.ServerCert.CertKey.KeyFile != "" {
		t.Errorf("files %q and %q without a cert dir", s.ServerCert.CertKey.CertFile, s.ServerCert.CertKey.KeyFile)
	}
	if s.ServerCert.GeneratedCert == nil {
		t.Fatal("no certificate generated in memory")
	}
	certPEM, keyPEM := s.ServerCert.GeneratedCert.CurrentCertKeyContent()
	checkPair(t, certPEM, keyPEM, []string{"localhost"}, []string{"127.0.0.1"})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, pair, certPEM, "localhost"); err != nil {
		t.Errorf("handshake trusting the generated certificates: %v", err)
	}
}

func TestSelfSignLeavesGivenPair(t *testing.T) {
	t.Parallel()
	certDir := t.TempDir()
	for _, args := range [][]string{
		{"--tls-cert-file=/given/tls.crt", "--tls-private-key-file=/given/tls.key"},
		{"--tls-cert-file=/given/tls.crt"},
	} {
		s := servingOptions(t, append(args, "--cert-dir="+certDir)...)
		selfSign(t, s)
		if s.ServerCert.CertKey.CertFile != "/given/tls.crt" || s.ServerCert.GeneratedCert != nil {
			t.Errorf("%v: serving %q (generated: %v), want the given file", args, s.ServerCert.CertKey.CertFile, s.ServerCert.GeneratedCert != nil)
		}
	}
	if entries, err := os.ReadDir(certDir); err != nil || len(entries) != 0 {
		t.Errorf("the cert dir holds %d files (%v), want none when a pair is given", len(entries), err)
	}
}
