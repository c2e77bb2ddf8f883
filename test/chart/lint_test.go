package chart_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLint: helm lint passes with the defaults and with every optional part on.
func TestLint(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  []string
	}{
		{name: "defaults"},
		{name: "cert-manager, ServiceMonitor, NetworkPolicy", set: []string{"certificates.mode=cert-manager", "serviceMonitor.enabled=true",
			"networkPolicy.enabled=true", "networkPolicy.from[0].ipBlock.cidr=10.0.0.0/16"}},
		{name: "anonymous webhooks", set: []string{"webhooks.anonymous=true", "networkPolicy.from[0].ipBlock.cidr=10.0.0.0/16"}},
		{name: "hub and kinds", set: []string{"hub.kubeconfigSecret=hub", "hub.clusterName=hub",
			"kinds[0].group=policy.example.com", "kinds[0].version=v1", "kinds[0].resource=guardrails"}},
		{name: "release values", set: []string{"certificates.mode=cert-manager", "namespace.create=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := []string{"lint", "--strict", chartDir, "--namespace", namespace, "--set", testImage}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			out, err := runHelm(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Errorf("helm lint:\n%s", out)
			}
		})
	}
}

// TestInvalidValues: values that can't work fail at render time with a
// message naming the value, instead of an install that never gets ready.
func TestInvalidValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want string
		set        []string
	}{
		{name: "unknown certificate mode", set: []string{"certificates.mode=self"}, want: "certificates.mode"},
		{name: "hub without a cluster name", set: []string{"hub.kubeconfigSecret=hub"}, want: "hub.clusterName"},
		{name: "anonymous webhooks open to all", set: []string{"webhooks.anonymous=true"}, want: "networkPolicy.from"},
		{name: "memory limit without a number", set: []string{"resources.limits.memory=lots"}, want: "resources.limits.memory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := template(t, namespace, tc.set...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template --set %v: error %v, want one naming %s", tc.set, err, tc.want)
			}
		})
	}
}

// TestReadmeDocumentsValues: every value in values.yaml has a row in the
// chart's README.
func TestReadmeDocumentsValues(t *testing.T) {
	t.Parallel()
	var values map[string]any
	readYAML(t, "charts/implicit-apiserver/values.yaml", &values)
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	// Documented as a whole rather than key by key.
	whole := map[string]bool{"resources": true}
	var walk func(prefix string, m map[string]any)
	var keys []string
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := prefix + k
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 && !whole[key] {
				walk(key+".", sub)
				continue
			}
			keys = append(keys, key)
		}
	}
	walk("", values)
	if len(keys) < 20 {
		t.Fatalf("found only %d values in values.yaml: %v", len(keys), keys)
	}
	for _, key := range keys {
		if !bytes.Contains(readme, []byte("`"+key+"`")) {
			t.Errorf("charts/implicit-apiserver/README.md does not document the value %s", key)
		}
	}
}
