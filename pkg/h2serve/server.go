package h2serve

import (
	"crypto/tls"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"k8s.io/apiserver/pkg/endpoints/metrics"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/klog/v2"
)

// The settings below are k8s.io/apiserver v0.37.2's
// (pkg/server/secure_serving.go, SecureServingInfo.Serve and tlsConfig).
const (
	// resourceBody99Percentile is k8s's per-stream upload buffer and
	// largest frame read: "at least 99% of serialized resources in
	// surveyed clusters were smaller than 256kb".
	resourceBody99Percentile = 256 * 1024
	// defaultMaxStreams is k8s's streams per connection when unset.
	defaultMaxStreams = 100
	// keepAlivePeriod is k8s's TCP keep-alive on accepted connections.
	keepAlivePeriod = 3 * time.Minute
	// maxUploadBufferPerConnection bounds a connection's upload window at
	// k8s's for its default streams (100 x 256 KiB, 25 MiB). k8s sizes it
	// as streams x 256 KiB; at this server's 1,000 streams that would let
	// one connection hold 256 MiB of request bodies its handlers have not
	// read (and overflow an int32 past 8,191 streams), while the streams
	// it carries are mostly watches, which send no body.
	maxUploadBufferPerConnection = defaultMaxStreams * resourceBody99Percentile
)

// uploadBufferPerConnection is a connection's upload window for streams
// streams per connection: 256 KiB each, at most
// maxUploadBufferPerConnection.
func uploadBufferPerConnection(streams uint32) int32 {
	return int32(min(uint64(streams)*resourceBody99Percentile, maxUploadBufferPerConnection))
}

// newServer is the http.Server k8s's Serve would build, with opts'
// write scheduler.
func newServer(info *genericapiserver.SecureServingInfo, handler http.Handler, tlsConfig *tls.Config, opts Options) (*http.Server, error) {
	srv := &http.Server{
		Addr:              info.Listener.Addr().String(),
		Handler:           handler,
		MaxHeaderBytes:    1 << 20,
		TLSConfig:         tlsConfig,
		IdleTimeout:       90 * time.Second,
		ReadHeaderTimeout: 32 * time.Second,
		ErrorLog:          log.New(&tlsHandshakeErrorWriter{out: os.Stderr}, "", 0),
	}
	h2 := &http2.Server{
		IdleTimeout:              90 * time.Second,
		MaxUploadBufferPerStream: resourceBody99Percentile,
		MaxReadFrameSize:         resourceBody99Percentile,
		MaxConcurrentStreams:     defaultMaxStreams,
		NewWriteScheduler:        opts.NewWriteScheduler,
	}
	if info.HTTP2MaxStreamsPerConnection > 0 {
		h2.MaxConcurrentStreams = uint32(info.HTTP2MaxStreamsPerConnection)
	}
	h2.MaxUploadBufferPerConnection = uploadBufferPerConnection(h2.MaxConcurrentStreams)
	if err := http2.ConfigureServer(srv, h2); err != nil {
		return nil, fmt.Errorf("h2serve: configuring HTTP/2: %w", err)
	}
	return srv, nil
}

// tlsConfigOf is the TLS configuration k8s's tlsConfig builds: its own
// certificate controller over the same providers, registered as their
// listener now (before their controllers run, which k8s's own Serve
// starts). start runs the controller until stop is closed.
func tlsConfigOf(info *genericapiserver.SecureServingInfo, stop <-chan struct{}) (*tls.Config, func(), error) {
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
	}
	if info.MinTLSVersion > 0 {
		cfg.MinVersion = info.MinTLSVersion
	}
	if len(info.CipherSuites) > 0 {
		cfg.CipherSuites = info.CipherSuites
	}
	if len(info.CurvePreferences) > 0 {
		cfg.CurvePreferences = info.CurvePreferences
	}
	if info.ClientCA != nil {
		// Client certificates are read, not required: the authenticators
		// (client certificates, kube-apiserver's front proxy) check them.
		cfg.ClientAuth = tls.RequestClientCert
	}
	if info.ClientCA == nil && info.Cert == nil && len(info.SNICerts) == 0 {
		return cfg, func() {}, nil
	}
	ctl := dynamiccertificates.NewDynamicServingCertificateController(cfg, info.ClientCA, info.Cert, info.SNICerts, nil)
	if info.ClientCA != nil {
		info.ClientCA.AddListener(ctl)
	}
	if info.Cert != nil {
		info.Cert.AddListener(ctl)
	}
	for _, sni := range info.SNICerts {
		sni.AddListener(ctl)
	}
	if err := ctl.RunOnce(); err != nil {
		return nil, nil, fmt.Errorf("h2serve: serving certificates: %w", err)
	}
	cfg.GetConfigForClient = ctl.GetConfigForClient
	start := func() {
		// The providers' controllers may have read newer files by now.
		if err := ctl.RunOnce(); err != nil {
			klog.Warningf("Population of the own server's dynamic certificates failed: %v", err)
		}
		go ctl.Run(1, stop)
	}
	return cfg, start, nil
}

// newTLSListener is k8s's: TCP keep-alive on each accepted TCP
// connection, under TLS.
func newTLSListener(ln net.Listener, cfg *tls.Config) net.Listener {
	return tls.NewListener(keepAliveListener{ln}, cfg)
}

type keepAliveListener struct{ net.Listener }

func (ln keepAliveListener) Accept() (net.Conn, error) {
	c, err := ln.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetKeepAlive(true)
		_ = tc.SetKeepAlivePeriod(keepAlivePeriod)
	}
	return c, nil
}

// tlsHandshakeErrorWriter logs TLS handshake errors at V(5) and counts
// them, as k8s's does; anything else goes to out.
type tlsHandshakeErrorWriter struct{ out *os.File }

func (w *tlsHandshakeErrorWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "http: TLS handshake error") {
		klog.V(5).Info(string(p))
		metrics.TLSHandshakeErrors.Inc()
		return len(p), nil
	}
	return w.out.Write(p)
}
