package server

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"

	"github.com/implicit-dev/implicit-apiserver/internal/selfsign"
)

// maybeSelfSign is k8s.io/apiserver's
// SecureServingOptions.MaybeDefaultWithSelfSignedCerts with ECDSA P-256 keys
// instead of RSA 2048 ones. When neither --tls-cert-file nor
// --tls-private-key-file is set, the pair <cert-dir>/<pair-name>.crt/.key
// is served, reused when both files are readable and otherwise generated
// and written there (the certificate file 0644, the key 0600); without a
// cert dir the pair is generated in memory. A generated pair is a CA and a
// serving certificate signed by it, for host, ips, and the bind address (or
// localhost when it is unspecified); the certificate file holds the serving
// certificate then the CA, so that it serves as a caBundle.
//
// Why ECDSA: when the server restarts, kube-apiserver's aggregator reopens
// every proxied watch at once and dials a new connection for many of them,
// each a full TLS handshake. With RSA 2048, signing those handshakes was
// most of the server's CPU in the reconnect storm (docs/benchmarks.md,
// "Replica switch"); a P-256 signature costs a small fraction of one.
func maybeSelfSign(s *genericoptions.SecureServingOptions, host string, ips []net.IP) error {
	if s == nil || (s.BindPort == 0 && s.Listener == nil) {
		return nil
	}
	pair := &s.ServerCert.CertKey
	if pair.CertFile != "" || pair.KeyFile != "" {
		return nil
	}
	if s.ServerCert.CertDirectory != "" {
		if s.ServerCert.PairName == "" {
			return errors.New("PairName is required if CertDirectory is set")
		}
		pair.CertFile = filepath.Join(s.ServerCert.CertDirectory, s.ServerCert.PairName+".crt")
		pair.KeyFile = filepath.Join(s.ServerCert.CertDirectory, s.ServerCert.PairName+".key")
		readable, err := certutil.CanReadCertAndKey(pair.CertFile, pair.KeyFile)
		if err != nil {
			return err
		}
		if readable {
			return nil
		}
	}

	var names []string
	ips = append([]net.IP(nil), ips...)
	if s.BindAddress == nil || s.BindAddress.IsUnspecified() {
		names = append(names, "localhost")
	} else {
		ips = append(ips, s.BindAddress)
	}
	certPEM, keyPEM, err := selfsign.ECDSA(host, names, ips, time.Now())
	if err != nil {
		return fmt.Errorf("unable to generate self signed cert: %w", err)
	}
	if pair.CertFile == "" {
		s.ServerCert.GeneratedCert, err = dynamiccertificates.NewStaticCertKeyContent("Generated self signed cert", certPEM, keyPEM)
		if err != nil {
			return err
		}
		klog.InfoS("Generated self-signed ECDSA P-256 certificate in memory")
		return nil
	}
	if err := certutil.WriteCert(pair.CertFile, certPEM); err != nil {
		return err
	}
	if err := keyutil.WriteKey(pair.KeyFile, keyPEM); err != nil {
		return err
	}
	klog.InfoS("Generated self-signed ECDSA P-256 certificate", "cert", pair.CertFile, "key", pair.KeyFile)
	return nil
}
