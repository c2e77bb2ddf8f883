package chart_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

// TestInstallUpgradeUninstall installs the chart with helm on a real
// kube-apiserver (no kubelet: the pods are never run), so that every object
// the chart renders passes the API server's validation; upgrades it and sees
// the chart-generated CA kept (lookup), so the caBundles don't change; and
// keeps the fields the server writes in its webhook configuration; and
// uninstalls it and sees the APIService gone.
func TestInstallUpgradeUninstall(t *testing.T) {
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

	helmCluster := func(args ...string) {
		t.Helper()
		args = append(args, "--kubeconfig", cp.KubeconfigPath())
		if _, err := runHelm(t, args...); err != nil {
			t.Fatal(err)
		}
	}
	caBundle := func() []byte {
		t.Helper()
		svc, err := agg.ApiregistrationV1().APIServices().Get(ctx, "v1alpha1.implicit.dev", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return svc.Spec.CABundle
	}
	// Any PEM does for the webhook client CA: no pod reads it here.
	pem := []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, append([]byte("image:\n  repository: registry.example.com/implicit-apiserver\nwebhooks:\n  clientCA:\n    pem: |\n"), indent(pem, "      ")...), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Log("helm install: every rendered object is accepted by kube-apiserver")
	helmCluster("install", "implicit-apiserver", chartDir, "--namespace", namespace, "--create-namespace", "--values", values)
	first := caBundle()
	if !bytes.HasPrefix(first, []byte("-----BEGIN CERTIFICATE-----")) {
		t.Fatalf("APIService caBundle after install: %q", first)
	}
	if _, err := kube.CoreV1().ResourceQuotas(namespace).Get(ctx, "implicit-apiserver-system-cluster-critical", metav1.GetOptions{}); err != nil {
		t.Errorf("the priority-class ResourceQuota: %v", err)
	}
	vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "implicit-apiserver", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range vwc.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, first) {
			t.Errorf("webhook %s: caBundle differs from the APIService's", w.Name)
		}
	}

	t.Log("the server keeps the guards' match conditions and source rules current, as its ConditionSync does")
	const synced = "object.metadata.name == 'synced'"
	extraRule := admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"policy.example.com"}, APIVersions: []string{"*"},
			Resources: []string{"guardrails"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
	}
	for i := range vwc.Webhooks {
		for j := range vwc.Webhooks[i].MatchConditions {
			if vwc.Webhooks[i].MatchConditions[j].Name == "implicit-sources" {
				vwc.Webhooks[i].MatchConditions[j].Expression = synced
			}
		}
		if vwc.Webhooks[i].Name == "shadows.implicit.dev" {
			vwc.Webhooks[i].Rules = append(vwc.Webhooks[i].Rules, extraRule)
		}
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, vwc, metav1.UpdateOptions{FieldManager: "implicit-apiserver"}); err != nil {
		t.Fatal(err)
	}

	t.Log("helm upgrade: the chart-generated CA is kept")
	helmCluster("upgrade", "implicit-apiserver", chartDir, "--namespace", namespace, "--values", values, "--set", "replicas=3")
	if again := caBundle(); !bytes.Equal(first, again) {
		t.Error("helm upgrade replaced the APIService's caBundle: lookup did not find the serving Secret")
	}
	// The upgrade (Helm's server-side apply) neither conflicts with the
	// server's fields nor resets them.
	vwc, err = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "implicit-apiserver", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range vwc.Webhooks {
		for _, c := range w.MatchConditions {
			if c.Name == "implicit-sources" && c.Expression != synced {
				t.Errorf("webhook %s: helm upgrade reset the synced condition to %q", w.Name, c.Expression)
			}
		}
		if w.Name == "shadows.implicit.dev" && !slices.ContainsFunc(w.Rules, func(r admissionregistrationv1.RuleWithOperations) bool {
			return slices.Equal(r.Resources, extraRule.Resources)
		}) {
			t.Errorf("webhook %s: helm upgrade dropped the rule the server added for a configured kind", w.Name)
		}
	}
	d, err := kube.AppsV1().Deployments(namespace).Get(ctx, "implicit-apiserver", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas %d after the upgrade, want 3", *d.Spec.Replicas)
	}

	t.Log("helm uninstall: the APIService is gone")
	helmCluster("uninstall", "implicit-apiserver", "--namespace", namespace)
	if _, err := agg.ApiregistrationV1().APIServices().Get(ctx, "v1alpha1.implicit.dev", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("APIService after uninstall: %v, want NotFound", err)
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "implicit-apiserver", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ValidatingWebhookConfiguration after uninstall: %v, want NotFound", err)
	}
}

func indent(b []byte, prefix string) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if len(line) > 0 {
			out = append(out, prefix...)
			out = append(out, line...)
		}
	}
	return out
}
