package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is long enough for any local session, short enough that a
// leaked work directory is not a standing credential.
const certValidity = 30 * 24 * time.Hour

// keyPair is a certificate with its private key, in memory and on disk.
type keyPair struct {
	cert     *x509.Certificate
	key      crypto.Signer
	certPEM  []byte
	keyPEM   []byte
	certPath string
	keyPath  string
}

// pki holds every credential of one control plane. All keys are ECDSA P-256:
// cheap to generate and accepted everywhere the control plane needs them,
// service-account tokens included (ES256).
type pki struct {
	dir string

	serverCA  *keyPair // signs kube-apiserver's serving certificate
	apiserver *keyPair // kube-apiserver's serving certificate

	clientCA *keyPair // --client-ca-file: signs users' client certificates
	admin    *keyPair // CN=admin, O=system:masters

	frontProxyCA     *keyPair // --requestheader-client-ca-file
	frontProxyClient *keyPair // --proxy-client-cert-file, CN=front-proxy-client

	serviceAccountKeyPath    string // private key, --service-account-signing-key-file
	serviceAccountPubKeyPath string // public key, --service-account-key-file
}

// newPKI generates every credential into dir. servingIPs are added to
// kube-apiserver's serving certificate beside 127.0.0.1 and 10.0.0.1.
func newPKI(dir string, servingIPs ...net.IP) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating PKI directory: %w", err)
	}
	p := &pki{dir: dir}
	var err error
	if p.serverCA, err = p.newCA("server-ca", "implicit-dev-server-ca"); err != nil {
		return nil, err
	}
	if p.apiserver, err = p.newCert("apiserver", p.serverCA, certTemplate{
		commonName: "kube-apiserver",
		usage:      x509.ExtKeyUsageServerAuth,
		dnsNames:   []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		ips:        append([]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}, servingIPs...),
	}); err != nil {
		return nil, err
	}
	if p.clientCA, err = p.newCA("client-ca", "implicit-dev-client-ca"); err != nil {
		return nil, err
	}
	if p.admin, err = p.newCert("admin", p.clientCA, certTemplate{
		commonName:    "admin",
		organizations: []string{"system:masters"},
		usage:         x509.ExtKeyUsageClientAuth,
	}); err != nil {
		return nil, err
	}
	if p.frontProxyCA, err = p.newCA("front-proxy-ca", "implicit-dev-front-proxy-ca"); err != nil {
		return nil, err
	}
	if p.frontProxyClient, err = p.newCert("front-proxy-client", p.frontProxyCA, certTemplate{
		commonName: "front-proxy-client",
		usage:      x509.ExtKeyUsageClientAuth,
	}); err != nil {
		return nil, err
	}
	if err := p.newServiceAccountKey(); err != nil {
		return nil, err
	}
	return p, nil
}

// certTemplate is what varies between the leaf certificates.
type certTemplate struct {
	commonName    string
	organizations []string
	usage         x509.ExtKeyUsage
	dnsNames      []string
	ips           []net.IP
}

func (p *pki) newCA(file, commonName string) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating key for %s: %w", commonName, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serialNumber(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return p.sign(file, tmpl, tmpl, key, key)
}

func (p *pki) newCert(file string, ca *keyPair, t certTemplate) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating key for %s: %w", t.commonName, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serialNumber(),
		Subject:      pkix.Name{CommonName: t.commonName, Organization: t.organizations},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{t.usage},
		DNSNames:     t.dnsNames,
		IPAddresses:  t.ips,
	}
	return p.sign(file, tmpl, ca.cert, key, ca.key)
}

// sign creates the certificate tmpl for key, signed by parent's signer, and
// writes <file>.crt and <file>.key unless file is empty.
func (p *pki) sign(file string, tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, signer crypto.Signer) (*keyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("signing certificate %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing certificate %s: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encoding key of %s: %w", tmpl.Subject.CommonName, err)
	}
	kp := &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	if file == "" {
		return kp, nil
	}
	kp.certPath = filepath.Join(p.dir, file+".crt")
	kp.keyPath = filepath.Join(p.dir, file+".key")
	if err := os.WriteFile(kp.certPath, kp.certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("writing certificate: %w", err)
	}
	if err := os.WriteFile(kp.keyPath, kp.keyPEM, 0o600); err != nil {
		return nil, fmt.Errorf("writing key: %w", err)
	}
	return kp, nil
}

// newServiceAccountKey writes the key pair kube-apiserver signs and verifies
// service-account tokens with.
func (p *pki) newServiceAccountKey() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating service-account key: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding service-account key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return fmt.Errorf("encoding service-account public key: %w", err)
	}
	p.serviceAccountKeyPath = filepath.Join(p.dir, "sa.key")
	p.serviceAccountPubKeyPath = filepath.Join(p.dir, "sa.pub")
	if err := os.WriteFile(p.serviceAccountKeyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("writing service-account key: %w", err)
	}
	if err := os.WriteFile(p.serviceAccountPubKeyPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return fmt.Errorf("writing service-account public key: %w", err)
	}
	return nil
}

// newClientCert signs a client certificate for user and groups with the
// client CA; it is kept in memory only.
func (p *pki) newClientCert(user string, groups []string) (*keyPair, error) {
	return p.newCert("", p.clientCA, certTemplate{
		commonName:    user,
		organizations: groups,
		usage:         x509.ExtKeyUsageClientAuth,
	})
}

// serialNumber is a random 128-bit serial, as RFC 5280 recommends.
func serialNumber() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		// crypto/rand does not fail on supported platforms.
		panic(fmt.Sprintf("reading random serial number: %v", err))
	}
	return n
}
