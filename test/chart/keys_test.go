package chart_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

// TestGeneratedKeysECDSA: every key the chart generates (the CA, the next
// CA of a rotation, the serving certificate's) is ECDSA P-256, whose
// signatures cost the server a small fraction of RSA ones in the TLS
// handshakes of a reconnect storm (README.md, "Certificates"), and the
// serving certificate still verifies against the bundle for the Service's
// name.
func TestGeneratedKeysECDSA(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  []string
		keys []string // keys of the CA Secret that hold private keys
	}{
		{name: "install", keys: []string{"tls.key"}},
		{name: "caRotation=prepare", set: []string{"certificates.caRotation=prepare"}, keys: []string{"tls.key", "next.key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs := mustTemplate(t, tc.set...)
			var ca, serving corev1.Secret
			convert(t, objs.get("Secret", "implicit-apiserver-ca"), &ca)
			convert(t, objs.get("Secret", "implicit-apiserver-serving-cert"), &serving)

			pair, err := tls.X509KeyPair(serving.Data["tls.crt"], serving.Data["tls.key"])
			if err != nil {
				t.Fatalf("the serving Secret's pair does not load: %v", err)
			}
			checkP256(t, "serving key", pair.PrivateKey)
			for _, k := range tc.keys {
				block, _ := pem.Decode(ca.Data[k])
				if block == nil {
					t.Fatalf("CA Secret %s: no PEM", k)
				}
				key, err := x509.ParseECPrivateKey(block.Bytes)
				if err != nil {
					t.Fatalf("CA Secret %s (%s): not an EC private key: %v", k, block.Type, err)
				}
				checkP256(t, "CA Secret "+k, key)
			}

			leaf, err := x509.ParseCertificate(pair.Certificate[0])
			if err != nil {
				t.Fatal(err)
			}
			roots := x509.NewCertPool()
			if !roots.AppendCertsFromPEM(serving.Data["ca.crt"]) {
				t.Fatal("the serving Secret's ca.crt holds no certificate")
			}
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "implicit-apiserver." + namespace + ".svc"}); err != nil {
				t.Errorf("the serving certificate does not verify against the bundle: %v", err)
			}
			if leaf.SignatureAlgorithm != x509.ECDSAWithSHA256 {
				t.Errorf("the serving certificate is signed with %s, want ECDSA-SHA256 (by an ECDSA CA)", leaf.SignatureAlgorithm)
			}
		})
	}
}

func checkP256(t *testing.T, what string, key any) {
	t.Helper()
	k, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		t.Errorf("%s is a %T, want *ecdsa.PrivateKey", what, key)
		return
	}
	if k.Curve != elliptic.P256() {
		t.Errorf("%s: curve %s, want P-256", what, k.Curve.Params().Name)
	}
}

// TestRSAKeysKept: Secrets made by a chart version that generated RSA keys
// are kept as they are (lookup), and a serving certificate re-issued after
// that (its Secret deleted, upgrade) has an ECDSA key signed by the kept RSA
// CA, so the caBundles and the nodes' kubeconfig don't change. On a real
// kube-apiserver, the previous chart's Secrets made here with RSA 2048 keys
// as sprig's genCA and genSignedCert made them.
func TestRSAKeysKept(t *testing.T) {
	binDir := os.Getenv(toolsBinEnv)
	if binDir == "" {
		t.Skipf("needs %s with etcd and kube-apiserver (make integration sets it)", toolsBinEnv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: binDir, WorkDir: t.TempDir(), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	kube := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte("image:\n  repository: registry.example.com/implicit-apiserver\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	helmCluster := func(args ...string) {
		t.Helper()
		args = append(args, "--kubeconfig", cp.KubeconfigPath(), "--namespace", namespace, "--values", values)
		if _, err := runHelm(t, args...); err != nil {
			t.Fatal(err)
		}
	}

	t.Log("the previous chart's Secrets, RSA keys, owned by the release")
	caCrt, caKey, crt, key := rsaPair(t, "implicit-apiserver."+namespace+".svc")
	owned := metav1.ObjectMeta{
		Namespace:   namespace,
		Labels:      map[string]string{"app.kubernetes.io/managed-by": "Helm"},
		Annotations: map[string]string{"meta.helm.sh/release-name": "implicit-apiserver", "meta.helm.sh/release-namespace": namespace},
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	caSecret := &corev1.Secret{ObjectMeta: *owned.DeepCopy(), Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"ca.crt": caCrt, "tls.crt": caCrt, "tls.key": caKey}}
	caSecret.Name = "implicit-apiserver-ca"
	servingSecret := &corev1.Secret{ObjectMeta: *owned.DeepCopy(), Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{"ca.crt": caCrt, "tls.crt": crt, "tls.key": key, "issuer.crt": caCrt}}
	servingSecret.Name = "implicit-apiserver-serving-cert"
	for _, s := range []*corev1.Secret{caSecret, servingSecret} {
		if _, err := kube.CoreV1().Secrets(namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(name string) map[string][]byte {
		t.Helper()
		s, err := kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Data
	}

	t.Log("install over them: both kept")
	helmCluster("install", "implicit-apiserver", chartDir)
	for _, want := range []*corev1.Secret{caSecret, servingSecret} {
		got := get(want.Name)
		for k, v := range want.Data {
			if !bytes.Equal(got[k], v) {
				t.Errorf("Secret %s: %s changed; existing keys must be kept", want.Name, k)
			}
		}
	}

	t.Log("re-issue the serving certificate: an ECDSA key, signed by the kept RSA CA")
	if err := kube.CoreV1().Secrets(namespace).Delete(ctx, servingSecret.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	helmCluster("upgrade", "implicit-apiserver", chartDir)
	if got := get(caSecret.Name); !bytes.Equal(got["tls.key"], caKey) || !bytes.Equal(got["ca.crt"], caCrt) {
		t.Error("the RSA CA or the bundle changed on re-issue")
	}
	serving := get(servingSecret.Name)
	pair, err := tls.X509KeyPair(serving["tls.crt"], serving["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	checkP256(t, "re-issued serving key", pair.PrivateKey)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caCrt)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "implicit-apiserver." + namespace + ".svc"}); err != nil {
		t.Errorf("the re-issued certificate does not verify against the RSA CA the nodes trust: %v", err)
	}
}

// rsaPair returns an RSA 2048 CA and a serving certificate for name it
// signed, and their keys (PKCS #1), PEM.
func rsaPair(t *testing.T, name string) (caCrt, caKey, crt, key []byte) {
	t.Helper()
	sign := func(template, parent *x509.Certificate, pub any, signer *rsa.PrivateKey) []byte {
		t.Helper()
		der, err := x509.CreateCertificate(rand.Reader, template, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	now := time.Now()
	caPriv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	caTemplate := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "implicit-apiserver-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment}
	caDER := sign(caTemplate, caTemplate, &caPriv.PublicKey, caPriv)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der := sign(&x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		ca, &priv.PublicKey, caPriv)
	enc := func(typ string, b []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}) }
	return enc("CERTIFICATE", caDER), enc("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(caPriv)),
		enc("CERTIFICATE", der), enc("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(priv))
}
