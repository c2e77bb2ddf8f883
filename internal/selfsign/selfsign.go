package selfsign

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math"
	"math/big"
	"net"
	"time"
)

// Validity is how long the certificates ECDSA makes are valid, as k8s.io/apiserver's
// self-signed ones.
const Validity = 365 * 24 * time.Hour

// ECDSA returns a serving certificate for host (a DNS name or an
// IP), names and ips, followed by the CA that signed it, and the serving
// certificate's key, all PEM. Both keys are ECDSA P-256; the CA's is
// dropped, so nothing else can be signed by it.
func ECDSA(host string, names []string, ips []net.IP, now time.Time) (certPEM, keyPEM []byte, err error) {
	notBefore := now.Add(-time.Hour) // clock skew between the server and its clients
	notAfter := notBefore.Add(Validity)

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
		if err := pem.Encode(&certs, &pem.Block{Type: "CERTIFICATE", Bytes: b}); err != nil {
			return nil, nil, err
		}
	}
	return certs.Bytes(), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
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
