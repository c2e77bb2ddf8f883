package webhook_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	userinfo "k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"

	"github.com/implicit-dev/implicit-apiserver/pkg/webhook"
)

// testCert is a certificate and its key.
type testCert struct {
	cert *x509.Certificate
	key  crypto.Signer
}

var serial atomic.Int64

// issue signs a certificate for cn with usage (a CA when usage is -1),
// by parent, or self-signed when parent is nil.
func issue(t *testing.T, cn string, usage x509.ExtKeyUsage, parent *testCert) testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	n := serial.Add(1)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(n),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if usage == -1 {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	}
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCert{cert: cert, key: key}
}

func caProvider(t *testing.T, ca testCert) dynamiccertificates.CAContentProvider {
	t.Helper()
	p, err := dynamiccertificates.NewStaticCAContent("webhook-client-ca", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCallersRequire(t *testing.T) {
	t.Parallel()
	ca := issue(t, "webhook-client-ca", -1, nil)
	other := issue(t, "other-ca", -1, nil)
	intermediate := issue(t, "intermediate", -1, &ca)
	const name = "kube-apiserver-webhook-client"
	good := issue(t, name, x509.ExtKeyUsageClientAuth, &ca)
	chained := issue(t, name, x509.ExtKeyUsageClientAuth, &intermediate)
	wrongName := issue(t, "someone-else", x509.ExtKeyUsageClientAuth, &ca)
	serving := issue(t, name, x509.ExtKeyUsageServerAuth, &ca)
	foreign := issue(t, name, x509.ExtKeyUsageClientAuth, &other)
	tests := []struct {
		name    string
		callers webhook.Callers
		tls     bool
		chain   []testCert
		want    int
	}{
		{name: "no TLS", callers: webhook.Callers{CA: caProvider(t, ca)}, want: http.StatusUnauthorized},
		{name: "no certificate", callers: webhook.Callers{CA: caProvider(t, ca)}, tls: true, want: http.StatusUnauthorized},
		{name: "signed by the CA", callers: webhook.Callers{CA: caProvider(t, ca)}, tls: true, chain: []testCert{good}, want: http.StatusOK},
		{name: "through an intermediate", callers: webhook.Callers{CA: caProvider(t, ca)}, tls: true, chain: []testCert{chained, intermediate}, want: http.StatusOK},
		{name: "intermediate not sent", callers: webhook.Callers{CA: caProvider(t, ca)}, tls: true, chain: []testCert{chained}, want: http.StatusForbidden},
		{name: "another CA", callers: webhook.Callers{CA: caProvider(t, ca)}, tls: true, chain: []testCert{foreign}, want: http.StatusForbidden},
		{name: "a serving certificate", callers: webhook.Callers{CA: caProvider(t, ca)}, tls: true, chain: []testCert{serving}, want: http.StatusForbidden},
		{name: "allowed name", callers: webhook.Callers{CA: caProvider(t, ca), Names: []string{"x", name}}, tls: true, chain: []testCert{good}, want: http.StatusOK},
		{name: "name not allowed", callers: webhook.Callers{CA: caProvider(t, ca), Names: []string{name}}, tls: true, chain: []testCert{wrongName}, want: http.StatusForbidden},
		{name: "no CA configured", tls: true, chain: []testCert{good}, want: http.StatusForbidden},
		{name: "no CA configured, no certificate", want: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reached := false
			h := tt.callers.Require(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached = true }))
			req := httptest.NewRequest(http.MethodPost, authorizePath, nil)
			if tt.tls {
				req.TLS = &tls.ConnectionState{}
				for _, c := range tt.chain {
					req.TLS.PeerCertificates = append(req.TLS.PeerCertificates, c.cert)
				}
			} else {
				req.TLS = nil
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Errorf("status %d (%s), want %d", rec.Code, rec.Body.String(), tt.want)
			}
			if reached != (tt.want == http.StatusOK) {
				t.Errorf("handler reached: %v, want %v", reached, tt.want == http.StatusOK)
			}
		})
	}
}

func TestSkipAuthentication(t *testing.T) {
	t.Parallel()
	asked := 0
	next := authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
		asked++
		return &authenticator.Response{User: &userinfo.DefaultInfo{Name: "alice"}}, true, nil
	})
	a := webhook.SkipAuthentication(next, []string{authorizePath, "/admission/locks"})
	for _, tt := range []struct {
		path, want string
		asked      int
	}{
		{path: authorizePath, want: userinfo.Anonymous},
		{path: "/admission/locks", want: userinfo.Anonymous},
		{path: "/authorize/", want: "alice", asked: 1},
		{path: "/apis/implicit.dev/v1alpha1", want: "alice", asked: 2},
	} {
		resp, ok, err := a.AuthenticateRequest(httptest.NewRequest(http.MethodPost, tt.path, nil))
		if err != nil || !ok || resp.User.GetName() != tt.want {
			t.Errorf("%s: authenticated as %v, %v, %v; want %s", tt.path, resp, ok, err, tt.want)
		}
		if asked != tt.asked {
			t.Errorf("%s: the next authenticator was asked %d times, want %d", tt.path, asked, tt.asked)
		}
	}
}

// authorizePath is pkg/authz's Path, which this package does not import.
const authorizePath = "/authorize"

// TestCallersPrepare: the webhook paths skip the generic authentication,
// and the admission webhooks are wrapped by Require unless anonymous.
func TestCallersPrepare(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		anonymous bool
		want      int
	}{
		{name: "certificates required", want: http.StatusUnauthorized},
		{name: "anonymous admission webhooks", anonymous: true, want: http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			next := authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
				return &authenticator.Response{User: &userinfo.DefaultInfo{Name: "alice"}}, true, nil
			})
			var authn authenticator.Request = next
			wrap, err := webhook.Callers{}.Prepare(webhook.Serving{Authenticator: &authn}, authorizePath, []string{"/admission/locks"}, tt.anonymous)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{authorizePath, "/admission/locks"} {
				resp, ok, err := authn.AuthenticateRequest(httptest.NewRequest(http.MethodPost, p, nil))
				if err != nil || !ok || resp.User.GetName() != userinfo.Anonymous {
					t.Errorf("%s: authenticated as %v, %v, %v; want the generic authentication skipped", p, resp, ok, err)
				}
			}
			rec := httptest.NewRecorder()
			wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/admission/locks", nil))
			if rec.Code != tt.want {
				t.Errorf("an admission review without a client certificate: %d, want %d", rec.Code, tt.want)
			}
		})
	}
}
