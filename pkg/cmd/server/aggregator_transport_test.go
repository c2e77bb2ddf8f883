package server_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"k8s.io/client-go/transport"
	certutil "k8s.io/client-go/util/cert"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/controllers/status/remote"
)

// TestAggregatorCheckSharesProxyConnections pins down why
// --http2-max-streams-per-connection decides the APIService's availability
// in a watch storm (docs/operations.md, "Reconnect storms"): in
// k8s.io/kube-aggregator v0.37.2 the availability check
// (pkg/controllers/status/remote) and the proxy (pkg/apiserver
// handler_proxy.go) both build their transport with
// remote.BuildTransportConfig from the same dialer and client certificate,
// and client-go's TLS transport cache hands both the same http.Transport.
// So the check's GETs take a free stream of the proxy's connections, and
// when watches hold every stream of every connection, the check waits for
// a new connection: a dial and a TLS handshake, within its 5 s.
func TestAggregatorCheckSharesProxyConnections(t *testing.T) {
	t.Parallel()
	const svcName = "implicit-apiserver.implicit-system.svc"
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(svcName, nil, []string{svcName})
	if err != nil {
		t.Fatal(err)
	}
	serverCert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}

	// A server that, like implicit-apiserver at its default, takes few
	// streams per connection (2 here), and holds a watch open until told.
	const streams = 2
	release := make(chan struct{})
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/watch" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-release
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	if err := http2.ConfigureServer(srv.Config, &http2.Server{MaxConcurrentStreams: streams}); err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, NextProtos: []string{"h2"}}
	srv.StartTLS()
	defer srv.Close()
	defer close(release)

	// kube-apiserver's: one dialer for the proxy and the check (its
	// proxyTransportDial), one proxy client certificate, the APIService's CA.
	dial := &transport.DialHolder{Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
	}}
	clientCert, clientKey, err := certutil.GenerateSelfSignedCertKey("front-proxy-client", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := &apiregistrationv1.APIService{Spec: apiregistrationv1.APIServiceSpec{
		Group: "implicit.dev", Version: "v1alpha1", CABundle: certPEM,
		Service: &apiregistrationv1.ServiceReference{Namespace: "implicit-system", Name: "implicit-apiserver"},
	}}
	proxy, err := transport.New(remote.BuildTransportConfig(dial, clientCert, clientKey, svc))
	if err != nil {
		t.Fatal(err)
	}
	check, err := transport.New(remote.BuildTransportConfig(dial, clientCert, clientKey, svc))
	if err != nil {
		t.Fatal(err)
	}
	if proxy != check {
		t.Fatalf("the check's transport %p is not the proxy's %p: they would not share connections", check, proxy)
	}

	get := func(rt http.RoundTripper, path string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "https://"+svcName+":443"+path, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if path != "/watch" {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	// One watch through the proxy: the check finds a free stream on its
	// connection and dials nothing.
	get(proxy, "/watch")
	get(check, "/apis/implicit.dev/v1alpha1")
	if n := conns.Load(); n != 1 {
		t.Fatalf("after one watch and a check: %d connections, want 1 (the check on the watch's connection)", n)
	}
	// Watches take every stream of the connection: the next check dials.
	var wg sync.WaitGroup
	for range streams - 1 {
		wg.Go(func() { get(proxy, "/watch") })
	}
	wg.Wait()
	get(check, "/apis/implicit.dev/v1alpha1")
	if n := conns.Load(); n != 2 {
		t.Fatalf("with every stream held by watches: %d connections after the check, want 2 (a new one dialed for it)", n)
	}
}
