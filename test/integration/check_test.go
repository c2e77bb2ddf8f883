package integration

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCheckCommand: `implicit-apiserver check`, what the chart's helm test
// runs, passes against a served APIService (here as admin, from outside a
// pod) and prints what it saw; and fails, saying why, when the APIService
// it waits for does not exist.
func TestCheckCommand(t *testing.T) {
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, os.Getenv(binaryEnv), append([]string{"check", "--kubeconfig=" + cp.KubeconfigPath()}, args...)...).CombinedOutput()
		return string(out), err
	}
	out, err := run("--namespace=implicit-system", "--timeout=30s")
	if err != nil || !strings.Contains(out, "ok: APIService v1alpha1.implicit.dev Available=True") || !strings.Contains(out, "ok: the view rolebindings.implicit.dev in namespace implicit-system answered") {
		t.Errorf("check against the suite's server: %v\n%s", err, out)
	}
	out, err = run("--namespace=implicit-system", "--timeout=3s", "--apiservice=v1.nothing.example.com")
	if err == nil || !strings.Contains(out, "FAIL: APIService v1.nothing.example.com not Available") {
		t.Errorf("check of a missing APIService: %v\n%s", err, out)
	}
}
