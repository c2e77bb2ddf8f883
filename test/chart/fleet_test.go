package chart_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestFleetValues: fleet.hub installs the MemberCluster CRD (artifacts/fleet/hub's,
// kept on uninstall), the server's read access to it, --fleet-hub and, with
// prometheusRule.enabled, the fleet's alerts; a member's values pass its
// flags and mount its report kubeconfig. Neither by default.
func TestFleetValues(t *testing.T) {
	t.Parallel()
	defaults := mustTemplate(t, "prometheusRule.enabled=true")
	if crd := defaults.get("CustomResourceDefinition", "memberclusters.fleet.implicit.dev"); crd != nil {
		t.Error("the MemberCluster CRD is installed by default, want only with fleet.hub")
	}
	for _, a := range defaults.args(t) {
		if strings.HasPrefix(a, "--fleet-") {
			t.Errorf("argument %s by default", a)
		}
	}
	if rules, _ := yaml.Marshal(defaults.get("PrometheusRule", "implicit-apiserver").Object); strings.Contains(string(rules), "ImplicitFleetMember") {
		t.Error("the fleet's alerts by default, want only with fleet.hub")
	}

	hub := mustTemplate(t, "fleet.hub=true", "prometheusRule.enabled=true")
	crd := hub.get("CustomResourceDefinition", "memberclusters.fleet.implicit.dev")
	if crd == nil {
		t.Fatal("no MemberCluster CRD with fleet.hub")
	}
	if crd.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
		t.Errorf("the CRD's annotations %v, want helm.sh/resource-policy: keep", crd.GetAnnotations())
	}
	raw, err := os.ReadFile(filepath.Join(chartDir, "..", "..", "artifacts", "fleet", "hub", "crd-memberclusters.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(crd.Object["spec"], want["spec"]) {
		t.Error("the chart's MemberCluster CRD differs from artifacts/fleet/hub/crd-memberclusters.yaml (copy it into files/)")
	}
	if !slices.Contains(hub.args(t), "--fleet-hub") {
		t.Errorf("arguments %v, want --fleet-hub", hub.args(t))
	}
	if hub.get("ClusterRole", "implicit-apiserver-fleet-hub") == nil || hub.get("ClusterRoleBinding", "implicit-apiserver-fleet-hub") == nil {
		t.Error("no ClusterRole and ClusterRoleBinding implicit-apiserver-fleet-hub with fleet.hub")
	}
	rules, _ := yaml.Marshal(hub.get("PrometheusRule", "implicit-apiserver").Object)
	for _, alert := range []string{"ImplicitFleetMemberSilent", "ImplicitFleetMemberUnreported", "ImplicitFleetMemberBehind", "ImplicitGlobalSourcesStale"} {
		if !strings.Contains(string(rules), "alert: "+alert) {
			t.Errorf("no alert %s in the PrometheusRule with fleet.hub", alert)
		}
	}
	if strings.Contains(string(rules), `job="implicit-apiserver"`) == false {
		t.Error("the fleet's alerts select no job of the release")
	}

	member := mustTemplate(t, "hub.kubeconfigSecret=hub", "hub.clusterName=hub", "fleet.memberName=member-1",
		"fleet.reportInterval=30s", "fleet.reportKubeconfigSecret=hub-report")
	for _, a := range []string{"--fleet-member-name=member-1", "--fleet-report-interval=30s", "--fleet-report-kubeconfig=/var/run/fleet-report/kubeconfig"} {
		if !slices.Contains(member.args(t), a) {
			t.Errorf("member arguments %v, want %s", member.args(t), a)
		}
	}
	for _, bad := range [][]string{
		{"fleet.reportInterval=soon"},
		{"fleet.memberName=member-1"},
		{"fleet.hub=true", "hub.kubeconfigSecret=hub", "hub.clusterName=hub"},
	} {
		if _, err := template(t, namespace, bad...); err == nil {
			t.Errorf("%v rendered, want a refusal", bad)
		}
	}
}
