package controlplane

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

func TestAuditArgs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	args, logPath, err := AuditArgs(dir, schema.GroupResource{Group: "apps", Resource: "deployments"}, schema.GroupResource{Resource: "configmaps"})
	if err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if want := filepath.Join(dir, "audit.log"); logPath != want {
		t.Errorf("log path %s, want %s", logPath, want)
	}
	for _, a := range []string{"--audit-policy-file=" + policy, "--audit-log-path=" + logPath} {
		if !slices.Contains(args, a) {
			t.Errorf("no %s in %q", a, args)
		}
	}
	raw, err := os.ReadFile(policy)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		OmitStages []string `json:"omitStages"`
		Rules      []struct {
			Level     string `json:"level"`
			Resources []struct {
				Group     string   `json:"group"`
				Resources []string `json:"resources"`
			} `json:"resources"`
		} `json:"rules"`
	}
	if err := yaml.UnmarshalStrict(raw, &p, yaml.DisallowUnknownFields); err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	if p.APIVersion != "audit.k8s.io/v1" || p.Kind != "Policy" || len(p.Rules) != 2 || p.Rules[0].Level != "Metadata" || p.Rules[1].Level != "None" {
		t.Fatalf("policy:\n%s", raw)
	}
	got := p.Rules[0].Resources
	if len(got) != 2 || got[0].Group != "apps" || !slices.Equal(got[0].Resources, []string{"deployments"}) || got[1].Group != "" || !slices.Equal(got[1].Resources, []string{"configmaps"}) {
		t.Errorf("the Metadata rule's resources: %+v", got)
	}
	if _, _, err := AuditArgs(dir); err == nil {
		t.Error("no error without resources")
	}
}
