package h2serve_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	certutil "k8s.io/client-go/util/cert"

	"github.com/implicit-dev/implicit-apiserver/pkg/h2serve"
)

// fixture is a parked secure port served by k8s.io/apiserver's own Serve,
// as GenericAPIServer runs it, and a client certificate its CA signed.
type fixture struct {
	addr       string
	serverCA   *x509.CertPool
	clientCert tls.Certificate
	stop       chan struct{}
	stopped    <-chan struct{} // k8s's Shutdown returned
	listenerUp <-chan struct{} // k8s's Serve returned
	srv        *http.Server
	streams    atomic.Int32 // streams the write scheduler opened
	conns      atomic.Int32
}

func newFixture(t *testing.T, maxStreams int, handler http.Handler) *fixture {
	t.Helper()
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := dynamiccertificates.NewStaticCertKeyContent("serving", certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	caCert, caKey, clientCert := clientCA(t)
	clientCAs, err := dynamiccertificates.NewStaticCAContent("client-ca", caCert)
	if err != nil {
		t.Fatal(err)
	}
	_ = caKey
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	info := &genericapiserver.SecureServingInfo{
		Listener:                     ln,
		Cert:                         serving,
		ClientCA:                     clientCAs,
		HTTP2MaxStreamsPerConnection: maxStreams,
	}
	f := &fixture{addr: ln.Addr().String(), clientCert: clientCert, stop: make(chan struct{}), serverCA: x509.NewCertPool()}
	f.serverCA.AppendCertsFromPEM(certPEM)
	srv, err := h2serve.Park(info, handler, h2serve.Options{
		NewWriteScheduler: func() http2.WriteScheduler {
			return &countingScheduler{WriteScheduler: h2serve.RandomWriteScheduler(), opened: &f.streams}
		},
		ShutdownTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.conns.Add(1)
		}
	}
	f.srv = srv
	// k8s's handler is never reached: its listener yields no connection.
	never := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("k8s's own server served a request") })
	f.stopped, f.listenerUp, err = info.Serve(never, 10*time.Second, f.stop)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-f.stop:
		default:
			close(f.stop)
		}
		<-f.stopped
	})
	return f
}

// client is an HTTP/2 client that keeps to one connection.
func (f *fixture) client() *http.Client {
	return &http.Client{Transport: &http2.Transport{
		TLSClientConfig:            &tls.Config{RootCAs: f.serverCA, Certificates: []tls.Certificate{f.clientCert}},
		StrictMaxConcurrentStreams: true,
	}}
}

type countingScheduler struct {
	http2.WriteScheduler
	opened *atomic.Int32
}

func (s *countingScheduler) OpenStream(id uint32, o http2.OpenStreamOptions) {
	s.opened.Add(1)
	s.WriteScheduler.OpenStream(id, o)
}

func TestParkedPortServesHTTP2WithClientCertificates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cn := ""
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		fmt.Fprintf(w, "%s %s", r.Proto, cn)
	}))
	resp, err := f.client().Get("https://" + f.addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got, want := string(body), "HTTP/2.0 front-proxy-client"; got != want {
		t.Fatalf("served %q, want %q", got, want)
	}
	if f.streams.Load() == 0 {
		t.Fatal("the configured write scheduler opened no stream")
	}
	// A client without a certificate is served too (RequestClientCert).
	anon := &http.Client{Transport: &http2.Transport{TLSClientConfig: &tls.Config{RootCAs: f.serverCA}}}
	resp, err = anon.Get("https://" + f.addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := string(body); got != "HTTP/2.0 " {
		t.Fatalf("served %q to a client without a certificate", got)
	}
}

// Many idle streams and one busy stream on one connection: every stream
// gets what its handler wrote.
func TestIdleStreamsBesideABusyOne(t *testing.T) {
	t.Parallel()
	const idle, chunks = 300, 2000
	release := make(chan struct{})
	var idleOpen sync.WaitGroup
	idleOpen.Add(idle)
	f := newFixture(t, 1000, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fl := w.(http.Flusher)
		if r.URL.Path == "/busy" {
			for i := range chunks {
				fmt.Fprintf(w, "event %d\n", i)
				fl.Flush()
			}
			return
		}
		w.WriteHeader(http.StatusOK)
		fl.Flush()
		idleOpen.Done()
		<-release
		fmt.Fprintf(w, "last %s\n", r.URL.Path)
	}))
	c := f.client()
	bodies := make(chan string, idle)
	for i := range idle {
		go func() {
			resp, err := c.Get(fmt.Sprintf("https://%s/idle-%d", f.addr, i))
			if err != nil {
				bodies <- "error: " + err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			bodies <- string(b)
		}()
	}
	idleOpen.Wait()
	resp, err := c.Get("https://" + f.addr + "/busy")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	n := 0
	for sc.Scan() {
		if want := fmt.Sprintf("event %d", n); sc.Text() != want {
			t.Fatalf("busy stream line %d: %q, want %q", n, sc.Text(), want)
		}
		n++
	}
	resp.Body.Close()
	if n != chunks {
		t.Fatalf("busy stream: %d lines, want %d", n, chunks)
	}
	close(release)
	for range idle {
		if b := <-bodies; !strings.HasPrefix(b, "last /idle-") {
			t.Fatalf("idle stream read %q", b)
		}
	}
	if got := f.conns.Load(); got != 1 {
		t.Fatalf("%d connections, want 1", got)
	}
	if got := f.streams.Load(); got != idle+1 {
		t.Fatalf("the write scheduler opened %d streams, want %d", got, idle+1)
	}
}

// k8s's stop (its http.Server.Shutdown closing the parked listener) shuts
// the own server down: new connections are refused, the open stream ends
// cleanly when its handler returns, and k8s's stopped channels close only
// after that.
func TestStopWaitsForOwnConnections(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	opened := make(chan struct{})
	f := newFixture(t, 1000, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(opened)
		<-release
		fmt.Fprint(w, "done")
	}))
	resp, err := f.client().Get("https://" + f.addr + "/watch")
	if err != nil {
		t.Fatal(err)
	}
	<-opened
	close(f.stop)
	// The port stops accepting.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", f.addr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the port still accepts 10s after the stop")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-f.stopped:
		t.Fatal("k8s's Shutdown returned while a stream of the own server was open")
	case <-f.listenerUp:
		t.Fatal("k8s's Serve returned while a stream of the own server was open")
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "done" {
		t.Fatalf("the open stream read %q, %v; want \"done\" and a clean end", body, err)
	}
	select {
	case <-f.stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("k8s's Shutdown did not return 10s after the last stream ended")
	}
	<-f.listenerUp
}
