package chart_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/cmd/server"
)

// TestClusterRole: the chart grants what artifacts/base grants, including
// list and watch of the server's webhook configuration (issue 14, item 1).
func TestClusterRole(t *testing.T) {
	t.Parallel()
	objs := mustTemplate(t)
	var role rbacv1.ClusterRole
	convert(t, objs.get("ClusterRole", "implicit-apiserver"), &role)
	var base rbacv1.ClusterRole
	readYAML(t, "artifacts/base/clusterrole.yaml", &base)
	if !reflect.DeepEqual(role.Rules, base.Rules) {
		t.Errorf("chart ClusterRole rules differ from artifacts/base/clusterrole.yaml:\nchart: %+v\nbase:  %+v", role.Rules, base.Rules)
	}
	for name, rules := range map[string][]rbacv1.PolicyRule{"chart": role.Rules, "artifacts/base": base.Rules} {
		for _, verb := range []string{"get", "list", "watch", "update"} {
			if !allows(rules, "admissionregistration.k8s.io", "validatingwebhookconfigurations", "implicit-apiserver", verb) {
				t.Errorf("%s ClusterRole: no %s on validatingwebhookconfigurations/implicit-apiserver", name, verb)
			}
		}
	}
	// The binding names the release's ServiceAccount.
	var binding rbacv1.ClusterRoleBinding
	convert(t, objs.get("ClusterRoleBinding", "implicit-apiserver"), &binding)
	want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "implicit-apiserver", Namespace: namespace}}
	if !reflect.DeepEqual(binding.Subjects, want) || binding.RoleRef.Name != "implicit-apiserver" {
		t.Errorf("ClusterRoleBinding %+v -> %s, want %+v -> implicit-apiserver", binding.Subjects, binding.RoleRef.Name, want)
	}
}

func allows(rules []rbacv1.PolicyRule, group, resource, name, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) &&
			(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name)) {
			return true
		}
	}
	return false
}

// TestAnonymousWebhooks: webhooks.anonymous passes --anonymous-webhooks and
// always comes with the NetworkPolicy that keeps the port private.
func TestAnonymousWebhooks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		set           []string
		wantAnonymous bool
		wantPolicy    bool
	}{
		{name: "default"},
		{name: "anonymous", set: []string{"webhooks.anonymous=true", "networkPolicy.from[0].ipBlock.cidr=172.16.0.0/12"}, wantAnonymous: true, wantPolicy: true},
		{name: "NetworkPolicy alone", set: []string{"networkPolicy.enabled=true", "networkPolicy.from[0].ipBlock.cidr=172.16.0.0/12"}, wantPolicy: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs := mustTemplate(t, tc.set...)
			if got := slices.Contains(objs.args(t), "--anonymous-webhooks=true"); got != tc.wantAnonymous {
				t.Errorf("--anonymous-webhooks=true in args: %v, want %v (args %q)", got, tc.wantAnonymous, objs.args(t))
			}
			policies := objs.ofKind("NetworkPolicy")
			if got := len(policies) == 1; got != tc.wantPolicy {
				t.Fatalf("%d NetworkPolicies rendered, want one: %v", len(policies), tc.wantPolicy)
			}
			if !tc.wantPolicy {
				return
			}
			from, _, _ := unstructured.NestedSlice(policies[0].Object, "spec", "ingress")
			if len(from) != 1 || !strings.Contains(fmt.Sprint(from), "172.16.0.0/12") {
				t.Errorf("NetworkPolicy ingress %v, want one rule from 172.16.0.0/12", from)
			}
		})
	}
}

// TestReleaseValues: dist/install.yaml (the chart with charts/release-values.yaml)
// carries no private key, makes its namespace as a non-tenant, and gets its
// certificate from cert-manager; rendered as `make release` does, it holds
// no helm test hook (a Pod that kubectl apply would run at once).
func TestReleaseValues(t *testing.T) {
	t.Parallel()
	out, err := runHelm(t, "template", "implicit-apiserver", chartDir, "--namespace", namespace, "--skip-tests",
		"--values", filepath.Join(repoRoot, "charts", "release-values.yaml"), "--set", "image.repository=implicit-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "PRIVATE KEY") || strings.Contains(out, "tls.key:") {
		t.Error("the release manifest carries a private key")
	}
	objs := parse(t, out)
	ns := objs.get("Namespace", namespace)
	if ns == nil || ns.GetLabels()["implicit.dev/inherit"] != "false" || ns.GetLabels()["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("release manifest namespace %v: want %s labeled implicit.dev/inherit=false and restricted", ns, namespace)
	}
	if objs.get("Certificate", "implicit-apiserver-serving-cert") == nil {
		t.Error("release manifest has no cert-manager Certificate")
	}
	for _, o := range objs {
		if _, hook := o.GetAnnotations()["helm.sh/hook"]; hook {
			t.Errorf("release manifest holds the hook %s %s", o.GetKind(), o.GetName())
		}
	}
}

// TestViewerRoles: the chart's aggregated view-reading roles are the
// artifacts': every view for admin, the NetworkPolicy views for view and
// edit too, and never the RBAC views for view or edit; the questions'
// role (hierarchies, explanations, previews, rulesreviews) likewise.
func TestViewerRoles(t *testing.T) {
	t.Parallel()
	objs := mustTemplate(t)
	for _, tc := range []struct{ name, file string }{
		{"implicit-viewer", "artifacts/base/clusterrole-implicit-viewer.yaml"},
		{"implicit-viewer-networkpolicies", "artifacts/base/clusterrole-implicit-viewer-networkpolicies.yaml"},
		{"implicit-questions", "artifacts/base/clusterrole-implicit-questions.yaml"},
	} {
		var chart, base rbacv1.ClusterRole
		convert(t, objs.get("ClusterRole", tc.name), &chart)
		readYAML(t, tc.file, &base)
		if !reflect.DeepEqual(chart.Rules, base.Rules) {
			t.Errorf("%s: chart rules %+v, artifacts %+v", tc.name, chart.Rules, base.Rules)
		}
		for _, l := range []string{"view", "edit", "admin"} {
			key := "rbac.authorization.k8s.io/aggregate-to-" + l
			if chart.Labels[key] != base.Labels[key] {
				t.Errorf("%s: chart %s=%q, artifacts %q", tc.name, key, chart.Labels[key], base.Labels[key])
			}
		}
		if base.Labels["rbac.authorization.k8s.io/aggregate-to-view"] == "true" || base.Labels["rbac.authorization.k8s.io/aggregate-to-edit"] == "true" {
			for _, res := range []string{"rolebindings", "roles"} {
				if allows(base.Rules, "implicit.dev", res, "", "list") {
					t.Errorf("%s is aggregated into view or edit and lets them list %s.implicit.dev", tc.name, res)
				}
			}
		}
	}
}

// TestConfiguredKindReaders: each configured kind's view gets a ClusterRole
// aggregated into the roles its aggregateTo names (default admin), the
// configuration with aggregateTo loads in the server, and the built-in kinds
// keep their fixed readers (no per-kind role, which would clash by name).
func TestConfiguredKindReaders(t *testing.T) {
	t.Parallel()
	objs := mustTemplate(t,
		"kinds[0].group=policy.example.com", "kinds[0].version=v1", "kinds[0].resource=guardrails",
		"kinds[0].aggregateTo={view,edit}",
		"kinds[1].group=example.com", "kinds[1].version=v1", "kinds[1].resource=things",
		"kinds[2].group=networking.k8s.io", "kinds[2].version=v1", "kinds[2].resource=networkpolicies")
	for _, tc := range []struct {
		resource string
		want     []string
	}{
		{"guardrails", []string{"view", "edit"}},
		{"things", []string{"admin"}},
	} {
		var role rbacv1.ClusterRole
		convert(t, objs.get("ClusterRole", "implicit-viewer-kind-"+tc.resource), &role)
		for _, r := range []string{"view", "edit", "admin"} {
			got := role.Labels["rbac.authorization.k8s.io/aggregate-to-"+r] == "true"
			if got != slices.Contains(tc.want, r) {
				t.Errorf("%s: aggregated to %s = %t, want %t (aggregateTo %v)", tc.resource, r, got, !got, tc.want)
			}
		}
		if !allows(role.Rules, "implicit.dev", tc.resource, "", "list") || len(role.Rules) != 1 {
			t.Errorf("%s: rules %+v, want get, list and watch on %s.implicit.dev only", tc.resource, role.Rules, tc.resource)
		}
	}
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" && o.GetName() == "implicit-viewer-kind-networkpolicies" {
			t.Error("a per-kind reader role for the built-in networkpolicies view")
		}
	}
	var cm corev1.ConfigMap
	convert(t, objs.get("ConfigMap", "implicit-apiserver-config"), &cm)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cm.Data["config.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := server.LoadConfiguration(path); err != nil {
		t.Errorf("the server can't load the chart's configuration with aggregateTo: %v\n%s", err, cm.Data["config.yaml"])
	}
}
