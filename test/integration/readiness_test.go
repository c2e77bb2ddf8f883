package integration

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

// TestReadyOnlyAfterSync runs a second implicit-apiserver whose host
// connection goes through a proxy that holds the first list of
// RoleBindings: /readyz must fail until the list is let through, then pass.
func TestReadyOnlyAfterSync(t *testing.T) {
	binary := os.Getenv(binaryEnv)
	release := make(chan struct{})
	var once sync.Once
	releaseOnce := func() { once.Do(func() { close(release) }) }
	t.Cleanup(releaseOnce)

	upstream, err := url.Parse(cp.APIServerURL())
	if err != nil {
		t.Fatal(err)
	}
	transport, err := rest.TransportFor(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	proxy.Transport = transport
	held := make(chan struct{}, 1)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The informer's initial list: a plain list, or a watch-list stream
		// (sendInitialEvents=true) where client-go uses one.
		q := r.URL.Query()
		initial := q.Get("watch") == "" || q.Get("sendInitialEvents") == "true"
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/rolebindings") && initial {
			select {
			case held <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	kubeconfig := filepath.Join(t.TempDir(), "via-proxy.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: "http://%s"}}]
users: [{name: none, user: {}}]
contexts: [{name: proxy, context: {cluster: proxy, user: none}}]
current-context: proxy
`, ln.Addr())), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Log("starting a second implicit-apiserver whose RoleBinding list is held by the proxy")
	second, err := cp.StartAggregated(t.Context(), controlplane.AggregatedServerOptions{
		Binary: binary, Name: "implicit-readiness", ReadyPath: "-",
		Args: []string{"--kubeconfig=" + kubeconfig},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Stop() })

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	readyz := func(ctx context.Context) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, second.URL()+"/readyz?verbose", nil)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	select {
	case <-held:
	case <-time.After(converge):
		t.Fatalf("the server never listed RoleBindings; log:\n%s", second.LogTail(30))
	}
	t.Log("the list is held: /readyz must fail with sources-synced, however long we look")
	// First the server answers at all, so that the looks below are not
	// vacuous (a connection refused is no 200 either).
	eventually(t, "/readyz to answer", func(ctx context.Context) error {
		if code, b := readyz(ctx); code == 0 {
			return errorf("%s", b)
		}
		return nil
	})
	var body string
	for i := 0; i < 5; i++ {
		code, b := readyz(t.Context())
		body = b
		if code == http.StatusOK {
			t.Fatalf("/readyz answered 200 while the RoleBinding list is held:\n%s", b)
		}
		time.Sleep(300 * time.Millisecond) // on purpose: the looks span 1.5s of the held list
	}
	if !strings.Contains(body, "[-]sources-synced failed") {
		t.Errorf("/readyz while held:\n%s\nwant [-]sources-synced failed", body)
	}

	t.Log("releasing the list: /readyz turns 200")
	releaseOnce()
	eventually(t, "/readyz to answer 200 after the release", func(ctx context.Context) error {
		if code, b := readyz(ctx); code != http.StatusOK {
			return errorf("%d:\n%s", code, b)
		}
		return nil
	})
}
