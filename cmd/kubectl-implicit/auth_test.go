package main

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAuthProviderOIDC: a kubeconfig whose user is an oidc auth-provider
// works as with kubectl: its id-token is sent as the bearer token.
func TestAuthProviderOIDC(t *testing.T) {
	t.Parallel()
	part := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	idToken := part(map[string]string{"alg": "RS256"}) + "." + part(map[string]any{"iss": "https://issuer.example.com", "exp": time.Now().Add(time.Hour).Unix()}) + ".c2ln"
	api := fakeServer(t)
	var mu sync.Mutex
	var auth []string
	// Credentials are sent over TLS only (clientcmd).
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		api.Config.Handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "`+srv.URL+`", insecure-skip-tls-verify: true}
users:
- name: u
  user:
    auth-provider:
      name: oidc
      config:
        idp-issuer-url: https://issuer.example.com
        client-id: kubectl
        id-token: `+idToken+`
contexts:
- name: c
  context: {cluster: c, user: u, namespace: team-b}
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runPlugin(t, "why", "rb", "ci-bot", "--kubeconfig="+kubeconfig, "--cache-dir="+t.TempDir())
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(auth) == 0 || strings.Join(auth, "") != strings.Repeat("Bearer "+idToken, len(auth)) {
		t.Errorf("Authorization headers %q, want the id-token as the bearer token", auth)
	}
}
