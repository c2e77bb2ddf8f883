package chart_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

// The CRDs the ci/ values need, from those projects' Go modules (the module
// proxy keeps every version): cert-manager's Issuer and Certificate, the
// Prometheus Operator's ServiceMonitor and PrometheusRule.
var crdModules = []struct{ module, version, dir string }{
	{"github.com/cert-manager/cert-manager", "v1.19.1", "deploy/crds"},
	{"github.com/prometheus-operator/prometheus-operator", "v0.85.0", "example/prometheus-operator-crd"},
}

// ciValues returns charts/implicit-apiserver/ci/*-values.yaml.
func ciValues(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("ci values files: %v %v", files, err)
	}
	return files
}

// TestCIValuesLint: every ci/*-values.yaml renders and passes helm lint
// --strict.
func TestCIValuesLint(t *testing.T) {
	t.Parallel()
	for _, file := range ciValues(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			out, err := runHelm(t, "lint", "--strict", chartDir, "--namespace", namespace, "--values", file)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Errorf("helm lint:\n%s", out)
			}
			if _, err := runHelm(t, "template", "implicit-apiserver", chartDir, "--namespace", namespace, "--values", file); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCIValuesDryRun: every ci/*-values.yaml, rendered, is accepted by a
// real kube-apiserver (kubectl apply --server-side --dry-run=server: schema
// validation, defaulting and admission, nothing stored), the test hooks
// included. The cert-manager and Prometheus Operator CRDs come from their Go
// modules; when the module proxy can't be reached, the files needing them
// are rendered and linted only (TestCIValuesLint), and the test logs which.
func TestCIValuesDryRun(t *testing.T) {
	binDir := os.Getenv(toolsBinEnv)
	if binDir == "" {
		t.Skipf("needs %s with etcd and kube-apiserver (make integration sets it)", toolsBinEnv)
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("needs kubectl on PATH")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: binDir, WorkDir: t.TempDir(), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	kube := kubernetes.NewForConfigOrDie(cp.AdminConfig())
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	run := func(stdin []byte, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", cp.KubeconfigPath()}, args...)...)
		cmd.Stdin = bytes.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	crds := true
	for _, m := range crdModules {
		dir, err := moduleDir(ctx, m.module, m.version)
		if err != nil {
			t.Logf("CRDs of %s@%s not obtainable (%v): files needing them are rendered and linted only", m.module, m.version, err)
			crds = false
			break
		}
		if out, err := run(nil, "apply", "--server-side", "-f", filepath.Join(dir, m.dir)); err != nil {
			t.Fatalf("applying the CRDs of %s@%s: %v\n%s", m.module, m.version, err, out)
		}
	}
	if crds {
		if out, err := run(nil, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all"); err != nil {
			t.Fatalf("CRDs not established: %v\n%s", err, out)
		}
	}

	for _, file := range ciValues(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			manifests, err := runHelm(t, "template", "implicit-apiserver", chartDir, "--namespace", namespace, "--values", file)
			if err != nil {
				t.Fatal(err)
			}
			needsCRDs := strings.Contains(manifests, "cert-manager.io/v1") || strings.Contains(manifests, "monitoring.coreos.com/v1")
			if needsCRDs && !crds {
				t.Skipf("%s needs CRDs the module proxy did not give: rendered and linted only", filepath.Base(file))
			}
			out, err := run([]byte(manifests), "apply", "--server-side", "--dry-run=server", "--field-manager=helm", "-f", "-")
			if err != nil {
				t.Fatalf("kubectl apply --server-side --dry-run=server of the chart with %s: %v\n%s", filepath.Base(file), err, out)
			}
			if !strings.Contains(out, "apiservice.apiregistration.k8s.io/v1alpha1.implicit.dev serverside-applied (server dry run)") {
				t.Errorf("the APIService was not dry-run applied:\n%s", out)
			}
			t.Logf("%d objects accepted by kube-apiserver", strings.Count(out, "(server dry run)"))
		})
	}
}

// moduleDir downloads module@version through the Go module proxy (or finds
// it in the module cache) and returns its directory.
func moduleDir(ctx context.Context, module, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GO111MODULE=on")
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil && err == nil {
		err = jerr
	}
	if info.Error != "" {
		return "", fmt.Errorf("%s", info.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", module, version, err)
	}
	return info.Dir, nil
}
