package integration

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

// TestWebhookCallers: implicit-apiserver's webhook endpoints answer only
// the caller presenting kube-apiserver's webhook client certificate. Anyone
// else reaching the port (no certificate, a cluster user's certificate, a
// certificate of another CA) gets 401 or 403 from every endpoint, and
// nothing it sent is decided. kube-apiserver's own calls keep working: the
// authorization and guard suites run through them.
func TestWebhookCallers(t *testing.T) {
	t.Parallel()
	ca, err := implicit.CABundle()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	webhookClient, err := cp.WebhookClientCertificate()
	if err != nil {
		t.Fatal(err)
	}
	adminCfg := cp.AdminConfig()
	clusterUser, err := tls.X509KeyPair(adminCfg.CertData, adminCfg.KeyData)
	if err != nil {
		t.Fatal(err)
	}
	foreign := selfSignedClient(t, "kube-apiserver-webhook-client")

	// client presents cert (none if nil) whatever CAs the server asks for.
	client := func(cert *tls.Certificate) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: roots,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				if cert == nil {
					return &tls.Certificate{}, nil
				}
				return cert, nil
			},
		}}}
	}
	sar, err := json.Marshal(authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "mallory", ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: "default", Verb: "get", Resource: "secrets", Name: "x"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	type endpoint struct {
		path string
		body []byte
		// reached is the status of the endpoint's own answer to body.
		reached int
	}
	// An AdmissionReview without a request is answered 400 by the guard
	// itself: past the caller check, and decides nothing.
	endpoints := []endpoint{{path: authz.Path, body: sar, reached: http.StatusOK}}
	for _, p := range webhookconfig.Paths {
		endpoints = append(endpoints, endpoint{path: p, body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), reached: http.StatusBadRequest})
	}
	callers := []struct {
		name string
		cert *tls.Certificate
		want int // 0: the endpoint's own answer
	}{
		{name: "no certificate", want: http.StatusUnauthorized},
		{name: "a cluster user's certificate", cert: &clusterUser, want: http.StatusForbidden},
		{name: "a certificate of another CA", cert: &foreign, want: http.StatusForbidden},
		{name: "kube-apiserver's webhook client certificate", cert: &webhookClient},
	}
	for _, c := range callers {
		hc := client(c.cert)
		for _, e := range endpoints {
			resp, err := hc.Post(implicit.URL()+e.path, "application/json", bytes.NewReader(e.body))
			if err != nil {
				t.Errorf("%s, POST %s: %v", c.name, e.path, err)
				continue
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			want := c.want
			if want == 0 {
				want = e.reached
			}
			t.Logf("%s, POST %s: %d %s", c.name, e.path, resp.StatusCode, bytes.TrimSpace(body))
			if resp.StatusCode != want {
				t.Errorf("%s, POST %s: status %d (%s), want %d", c.name, e.path, resp.StatusCode, bytes.TrimSpace(body), want)
			}
			if c.want == 0 && e.path == authz.Path {
				var got authorizationv1.SubjectAccessReview
				if err := json.Unmarshal(body, &got); err != nil || got.Status.Allowed {
					t.Errorf("POST %s as kube-apiserver: %s, want a SubjectAccessReview that does not allow (err %v)", e.path, body, err)
				}
			}
		}
		hc.CloseIdleConnections()
	}
}

// selfSignedClient is a client certificate for cn that signs itself.
func selfSignedClient(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestAnonymousWebhooks: with --anonymous-webhooks=true (managed control
// planes) the admission webhooks answer a caller without a certificate, and
// the server says so in a warning at start; /authorize still refuses it.
func TestAnonymousWebhooks(t *testing.T) {
	t.Parallel()
	t.Log("starting a second implicit-apiserver with --anonymous-webhooks=true")
	server, err := cp.StartAggregated(t.Context(), controlplane.AggregatedServerOptions{
		Binary: os.Getenv(binaryEnv), Name: "implicit-anonymous",
		Args: append([]string{"-v=2", "--webhook-configuration=", "--anonymous-webhooks=true"}, cp.WebhookServerArgs()...),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("implicit-anonymous log tail:\n%s", server.LogTail(40))
		}
		if err := server.Stop(); err != nil {
			t.Errorf("stopping implicit-anonymous: %v", err)
		}
	})
	ca, err := server.CABundle()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	defer hc.CloseIdleConnections()
	want := map[string]int{authz.Path: http.StatusUnauthorized}
	for _, p := range webhookconfig.Paths {
		want[p] = http.StatusBadRequest // the guard's own answer to a review without a request
	}
	for path, code := range want {
		resp, err := hc.Post(server.URL()+path, "application/json", strings.NewReader(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`))
		if err != nil {
			t.Errorf("POST %s: %v", path, err)
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		t.Logf("POST %s without a certificate: %d %s", path, resp.StatusCode, bytes.TrimSpace(body))
		if resp.StatusCode != code {
			t.Errorf("POST %s without a certificate: %d, want %d", path, resp.StatusCode, code)
		}
	}
	log, err := os.ReadFile(server.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "--anonymous-webhooks: the admission webhooks") {
		t.Errorf("no warning about --anonymous-webhooks in the log:\n%s", server.LogTail(20))
	}
}
