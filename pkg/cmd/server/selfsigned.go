package server

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net"
	"path/filepath"
	"time"

	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"
)

// selfSignedValidity is how long a self-signed certificate is valid, as
// k8s.io/apiserver's self-signed ones.
const selfSignedValidity = 365 * 24 * time.Hour

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
	certPEM, keyPEM, err := selfSignedECDSA(host, names, ips, time.Now())
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

// selfSignedECDSA returns a serving certificate for host (a DNS name or an
// IP), names and ips, followed by the CA that signed it, and the serving
// certificate's key, all PEM. Both keys are ECDSA P-256; the CA's is
// dropped, so nothing else can be signed by it.
func selfSignedECDSA(host string, names []string, ips []net.IP, now time.Time) (certPEM, keyPEM []byte, err error) {
	notBefore := now.Add(-time.Hour) // clock skew between the server and its clients
	notAfter := notBefore.Add(selfSignedValidity)

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	caTemplate := &x509.Certificate{
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s-ca@%d", host, now.Unix())},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := signCertificate(caTemplate, caTemplate, caKey.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, err
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	template := &x509.Certificate{
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", host, now.Unix())},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	if ip := net.ParseIP(host); ip != nil {
		template.IPAddresses = append(template.IPAddresses, ip)
	} else {
		template.DNSNames = append(template.DNSNames, host)
	}
	template.DNSNames = append(template.DNSNames, names...)
	template.IPAddresses = append(template.IPAddresses, ips...)
	der, err := signCertificate(template, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the serving certificate: %w", err)
	}

	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	var certs bytes.Buffer
	for _, b := range [][]byte{der, caDER} {
		if err := pem.Encode(&certs, &pem.Block{Type: certutil.CertificateBlockType, Bytes: b}); err != nil {
			return nil, nil, err
		}
	}
	return certs.Bytes(), pem.EncodeToMemory(&pem.Block{Type: keyutil.ECPrivateKeyBlockType, Bytes: keyDER}), nil
}

// signCertificate gives template a random serial number in [1, 2^63) and
// signs it with the key of parent.
func signCertificate(template, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, big.NewInt(math.MaxInt64))
	if err != nil {
		return nil, err
	}
	template.SerialNumber = serial.Add(serial, big.NewInt(1))
	return x509.CreateCertificate(rand.Reader, template, parent, pub, signer)
}
