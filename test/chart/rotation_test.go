package chart_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

// TestCertificateRotation: the chart-generated CA lives longer than the
// serving certificate and every rotation keeps what the control plane
// already trusts valid. Through helm install and upgrades on a real
// kube-apiserver (lookup sees the Secrets):
//
//   - re-issuing the serving certificate (delete its Secret, upgrade) keeps
//     the CA and so every caBundle, and the authorization webhook's
//     kubeconfig on the control-plane nodes, unchanged;
//   - rotating the CA goes prepare (the bundle holds old and new, the
//     certificate is still the old CA's), promote (the certificate is the
//     new CA's, and verifies against the bundle of the prepare step, which
//     the nodes were given), then back to "" (the bundle is the new CA);
//   - promote without a prepared CA is refused;
//   - uninstall keeps the CA Secret, and a re-install serves from it.
func TestCertificateRotation(t *testing.T) {
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
	agg := aggregator.NewForConfigOrDie(cp.AdminConfig())

	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte("image:\n  repository: registry.example.com/implicit-apiserver\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	helmCluster := func(args ...string) error {
		t.Helper()
		args = append(args, "--kubeconfig", cp.KubeconfigPath(), "--namespace", namespace)
		if args[0] != "uninstall" {
			args = append(args, "--values", values)
		}
		_, err := runHelm(t, args...)
		return err
	}
	upgrade := func(rotation string) {
		t.Helper()
		if err := helmCluster("upgrade", "implicit-apiserver", chartDir, "--set", "certificates.caRotation="+rotation); err != nil {
			t.Fatal(err)
		}
	}
	// state is what kube-apiserver trusts and what the pods would serve.
	type state struct {
		bundle  []byte // the APIService's caBundle (the webhooks' are checked equal)
		caKept  []byte // ca.crt of the CA Secret: what operators copy to the nodes
		serving []byte // tls.crt of the serving Secret
	}
	read := func() state {
		t.Helper()
		svc, err := agg.ApiregistrationV1().APIServices().Get(ctx, "v1alpha1.implicit.dev", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "implicit-apiserver", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range vwc.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, svc.Spec.CABundle) {
				t.Errorf("webhook %s: caBundle differs from the APIService's", w.Name)
			}
		}
		ca, err := kube.CoreV1().Secrets(namespace).Get(ctx, "implicit-apiserver-ca", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		serving, err := kube.CoreV1().Secrets(namespace).Get(ctx, "implicit-apiserver-serving-cert", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ca.Data["ca.crt"], svc.Spec.CABundle) || !bytes.Equal(serving.Data["ca.crt"], svc.Spec.CABundle) {
			t.Error("the Secrets' ca.crt differ from the caBundle")
		}
		return state{bundle: svc.Spec.CABundle, caKept: ca.Data["ca.crt"], serving: serving.Data["tls.crt"]}
	}
	// verifies reports whether the serving certificate verifies against bundle
	// for the Service's name, as kube-apiserver checks it.
	verifies := func(serving, bundle []byte) bool {
		t.Helper()
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(bundle) {
			t.Fatalf("bundle holds no certificate: %q", bundle)
		}
		block, _ := pem.Decode(serving)
		if block == nil {
			t.Fatalf("serving certificate is no PEM: %q", serving)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		_, err = cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "implicit-apiserver." + namespace + ".svc"})
		return err == nil
	}
	count := func(bundle []byte) int { return bytes.Count(bundle, []byte("BEGIN CERTIFICATE")) }

	t.Log("install: one CA, a serving certificate it issued")
	if err := helmCluster("install", "implicit-apiserver", chartDir, "--create-namespace"); err != nil {
		t.Fatal(err)
	}
	s0 := read()
	if count(s0.bundle) != 1 || !verifies(s0.serving, s0.bundle) {
		t.Fatalf("after install: %d CAs in the bundle, serving certificate verifies: %v", count(s0.bundle), verifies(s0.serving, s0.bundle))
	}
	nodes := s0.bundle // what the authorization webhook's kubeconfig on the nodes trusts

	t.Log("re-issue the serving certificate: delete its Secret, upgrade")
	if err := kube.CoreV1().Secrets(namespace).Delete(ctx, "implicit-apiserver-serving-cert", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	upgrade("")
	s1 := read()
	if bytes.Equal(s1.serving, s0.serving) {
		t.Error("the serving certificate was not re-issued")
	}
	if !bytes.Equal(s1.bundle, s0.bundle) {
		t.Error("re-issuing the serving certificate changed the caBundle: the control plane's kubeconfig would no longer verify it")
	}
	if !verifies(s1.serving, nodes) {
		t.Error("the re-issued serving certificate does not verify against the CA the nodes trust")
	}

	t.Log("CA rotation, prepare: old and new CA trusted, certificate unchanged")
	upgrade("prepare")
	s2 := read()
	if count(s2.bundle) != 2 || !bytes.Contains(s2.bundle, s0.bundle) || !bytes.Equal(s2.serving, s1.serving) {
		t.Fatalf("after prepare: %d CAs, old CA kept: %v, certificate kept: %v", count(s2.bundle), bytes.Contains(s2.bundle, s0.bundle), bytes.Equal(s2.serving, s1.serving))
	}
	upgrade("prepare") // idempotent: the same next CA
	if again := read(); !bytes.Equal(again.bundle, s2.bundle) {
		t.Error("a second prepare made another CA")
	}
	nodes = s2.caKept // the operator copies the bundle to the nodes

	t.Log("CA rotation, promote: the certificate is the new CA's, both still trusted")
	upgrade("promote")
	s3 := read()
	if bytes.Equal(s3.serving, s2.serving) || verifies(s3.serving, s0.bundle) {
		t.Error("promote did not re-issue the serving certificate from the new CA")
	}
	if !verifies(s3.serving, nodes) || !verifies(s3.serving, s3.bundle) || !verifies(s2.serving, s3.bundle) {
		t.Error("after promote, the serving certificate (new or old) does not verify against the bundles of prepare and promote")
	}

	t.Log("CA rotation, done: the old CA is dropped")
	upgrade("")
	s4 := read()
	if count(s4.bundle) != 1 || bytes.Contains(s4.bundle, s0.bundle) || !bytes.Equal(s4.serving, s3.serving) || !verifies(s4.serving, s4.bundle) {
		t.Errorf("after the rotation: %d CAs, old CA still there: %v, certificate kept: %v", count(s4.bundle), bytes.Contains(s4.bundle, s0.bundle), bytes.Equal(s4.serving, s3.serving))
	}
	if err := helmCluster("upgrade", "implicit-apiserver", chartDir, "--set", "certificates.caRotation=promote"); err == nil || !strings.Contains(err.Error(), "prepare first") {
		t.Errorf("promote without a prepared CA: %v, want a refusal saying to prepare first", err)
	}

	t.Log("uninstall keeps the CA; a re-install serves from it")
	if err := helmCluster("uninstall", "implicit-apiserver"); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Secrets(namespace).Get(ctx, "implicit-apiserver-ca", metav1.GetOptions{}); err != nil {
		t.Fatalf("CA Secret after uninstall: %v", err)
	}
	if _, err := kube.CoreV1().Secrets(namespace).Get(ctx, "implicit-apiserver-serving-cert", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("serving Secret after uninstall: %v, want NotFound", err)
	}
	if err := helmCluster("install", "implicit-apiserver", chartDir); err != nil {
		t.Fatal(err)
	}
	if s5 := read(); !bytes.Equal(s5.bundle, s4.bundle) || !verifies(s5.serving, s4.bundle) {
		t.Error("a re-install made a new CA: the control plane's kubeconfig would no longer verify the server")
	}
}
