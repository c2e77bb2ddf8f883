package chart_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestMonitoring: the Grafana dashboard's ConfigMap and the PrometheusRule
// are off by default; on, the ConfigMap carries the sidecar's label and the
// dashboard unchanged, and the PrometheusRule the rule file's groups with
// the job selector naming the Service, which is the ServiceMonitor's job.
// (test/integration/monitoring_test.go checks the expressions themselves.)
func TestMonitoring(t *testing.T) {
	t.Parallel()
	defaults := mustTemplate(t)
	if n := len(defaults.ofKind("PrometheusRule")); n != 0 {
		t.Errorf("%d PrometheusRules by default, want none", n)
	}
	for _, cm := range defaults.ofKind("ConfigMap") {
		if cm.GetLabels()["grafana_dashboard"] != "" {
			t.Errorf("ConfigMap %s with the dashboard label by default, want none", cm.GetName())
		}
	}

	objs := mustTemplate(t, "grafanaDashboard.enabled=true", "prometheusRule.enabled=true", "fullnameOverride=implicit",
		"prometheusRule.labels.release=prom", "grafanaDashboard.namespace=monitoring")
	cm := objs.get("ConfigMap", "implicit-dashboard")
	if cm == nil {
		t.Fatal("no ConfigMap implicit-dashboard")
	}
	if cm.GetLabels()["grafana_dashboard"] != "1" || cm.GetNamespace() != "monitoring" {
		t.Errorf("dashboard ConfigMap labels %v in %q, want grafana_dashboard: \"1\" in monitoring", cm.GetLabels(), cm.GetNamespace())
	}
	file, err := os.ReadFile(filepath.Join(chartDir, "files", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want, got map[string]any
	if err := json.Unmarshal(file, &want); err != nil {
		t.Fatalf("files/grafana-dashboard.json: %v", err)
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", "implicit-apiserver.json")
	if err := json.Unmarshal([]byte(data), &got); err != nil {
		t.Fatalf("the ConfigMap's implicit-apiserver.json: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Error("the ConfigMap's dashboard differs from files/grafana-dashboard.json")
	}

	rule := objs.get("PrometheusRule", "implicit")
	if rule == nil {
		t.Fatal("no PrometheusRule implicit")
	}
	if rule.GetLabels()["release"] != "prom" {
		t.Errorf("PrometheusRule labels %v, want release: prom", rule.GetLabels())
	}
	raw, err := os.ReadFile(filepath.Join(chartDir, "files", "prometheus-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var wantSpec map[string]any
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(string(raw), `job="implicit-apiserver"`, `job="implicit"`)), &wantSpec); err != nil {
		t.Fatalf("files/prometheus-rules.yaml: %v", err)
	}
	if !reflect.DeepEqual(rule.Object["spec"], wantSpec) {
		t.Errorf("the PrometheusRule's spec differs from files/prometheus-rules.yaml with job=\"implicit\":\n%v", rule.Object["spec"])
	}
	if !strings.Contains(string(raw), `job="implicit-apiserver"`) {
		t.Error("files/prometheus-rules.yaml selects no job=\"implicit-apiserver\": the template's replacement does nothing")
	}
	spec, _ := json.Marshal(rule.Object["spec"])
	if strings.Contains(string(spec), `job=\"implicit-apiserver\"`) {
		t.Error("the PrometheusRule still selects job=\"implicit-apiserver\" with fullnameOverride=implicit")
	}
	sm := mustTemplate(t, "serviceMonitor.enabled=true", "fullnameOverride=implicit").get("Service", "implicit")
	if sm == nil {
		t.Error("no Service implicit: the ServiceMonitor's job would not be the PrometheusRule's")
	}

	out, err := runHelm(t, "lint", "--strict", chartDir, "--namespace", namespace, "--set", testImage,
		"--set", "grafanaDashboard.enabled=true", "--set", "prometheusRule.enabled=true", "--set", "serviceMonitor.enabled=true")
	if err != nil || !strings.Contains(out, "0 chart(s) failed") {
		t.Errorf("helm lint with the dashboard and the rules: %v\n%s", err, out)
	}
}
