package h2serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/klog/v2"
)

// Options are the serving settings k8s.io/apiserver does not hold.
type Options struct {
	// NewWriteScheduler is the HTTP/2 write scheduler of each connection;
	// nil: x/net's default (round robin).
	NewWriteScheduler func() http2.WriteScheduler
	// ShutdownTimeout bounds the wait for connections to end at shutdown
	// (GenericAPIServer.ShutdownTimeout).
	ShutdownTimeout time.Duration
}

// RandomWriteScheduler is x/net's random write scheduler: control frames
// first, then any stream with frames queued; streams without any are not
// kept, so a write never walks idle streams.
func RandomWriteScheduler() http2.WriteScheduler {
	return http2.NewRandomWriteScheduler() //nolint:staticcheck // deprecated for user code, still the one that skips idle streams
}

// Park replaces info.Listener by a parked listener and serves the real one
// with handler (see the package documentation). It returns the server that
// will serve, for tests. info must have a listener and HTTP/2 enabled.
func Park(info *genericapiserver.SecureServingInfo, handler http.Handler, opts Options) (*http.Server, error) {
	if info == nil || info.Listener == nil {
		return nil, errors.New("h2serve: no listener to serve")
	}
	if info.DisableHTTP2 {
		return nil, errors.New("h2serve: HTTP/2 is disabled")
	}
	stop := make(chan struct{})
	tlsConfig, start, err := tlsConfigOf(info, stop)
	if err != nil {
		return nil, err
	}
	srv, err := newServer(info, handler, tlsConfig, opts)
	if err != nil {
		return nil, err
	}
	p := &parked{
		real:     info.Listener,
		srv:      srv,
		timeout:  opts.ShutdownTimeout,
		startTLS: start,
		stop:     stop,
		done:     make(chan struct{}),
	}
	info.Listener = p
	return srv, nil
}

// parked is the listener k8s.io/apiserver's own server accepts from.
type parked struct {
	real     net.Listener
	srv      *http.Server
	timeout  time.Duration
	startTLS func()
	stop     chan struct{} // closed when this server has stopped
	done     chan struct{} // closed when Accept may return

	mu       sync.Mutex
	started  bool
	closed   bool
	serveErr error
	finished sync.Once
}

var _ net.Listener = (*parked)(nil)

// Accept starts the own server on its first call and returns once that
// server has stopped: after Close, when it has shut down.
func (p *parked) Accept() (net.Conn, error) {
	p.mu.Lock()
	if !p.started && !p.closed {
		p.started = true
		go p.serve()
	}
	p.mu.Unlock()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.serveErr != nil {
		return nil, p.serveErr
	}
	return nil, net.ErrClosed
}

// serve runs the own server until it stops; Accept returns then, or, if
// it stopped for Close, once its Shutdown has returned.
func (p *parked) serve() {
	p.startTLS()
	klog.Infof("Serving securely on %s (own HTTP/2 server, pkg/h2serve)", p.real.Addr())
	err := p.srv.Serve(newTLSListener(p.real, p.srv.TLSConfig))
	if errors.Is(err, http.ErrServerClosed) {
		return // Close's shutdown ends it
	}
	p.mu.Lock()
	p.serveErr = fmt.Errorf("h2serve: %w", err)
	p.mu.Unlock()
	p.finish()
}

// Close shuts the own server down and does not wait: k8s.io/apiserver's
// http.Server.Shutdown calls it with its lock held, then waits for its
// Accept loop, which Accept holds until the shutdown is over.
func (p *parked) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if !p.started {
		p.real.Close()
		go p.finish()
		return nil
	}
	go p.shutdown()
	return nil
}

// shutdown sends GOAWAY on every connection (http2.ConfigureServer's
// shutdown hook), stops listening and waits for the connections to end,
// at most the shutdown timeout.
func (p *parked) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		klog.Errorf("Failed to shut down the own HTTP/2 server: %v", err)
	}
	p.finish()
}

// finish releases Accept and stops the certificate controller.
func (p *parked) finish() {
	p.finished.Do(func() {
		close(p.stop)
		close(p.done)
	})
}

// Addr is the real listener's address.
func (p *parked) Addr() net.Addr { return p.real.Addr() }
