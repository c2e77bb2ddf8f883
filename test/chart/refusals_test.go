package chart_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestLintWithoutImage: helm lint --strict without image.repository fails,
// once, naming the value (helm lint does not fail on a template's fail:
// the values' schema refuses it).
func TestLintWithoutImage(t *testing.T) {
	t.Parallel()
	out, err := runHelm(t, "lint", "--strict", chartDir, "--namespace", namespace)
	if err == nil {
		t.Fatalf("helm lint --strict without image.repository passes:\n%s", out)
	}
	msg := out + err.Error()
	if !strings.Contains(msg, "/image/repository") {
		t.Errorf("the failure does not name image.repository:\n%s", msg)
	}
	if strings.Contains(msg, "funcMap fail") {
		t.Errorf("the failure is a template's fail logged per template:\n%s", msg)
	}
}

// TestRefusedValues: each value that can't work is refused at render time
// by a message naming that value.
func TestRefusedValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want string
		set        []string
	}{
		{name: "a client CA that is no PEM", set: []string{"webhooks.clientCA.pem=notapem"}, want: "webhooks.clientCA.pem: not a PEM"},
		{name: "the policy example without ConfigMaps among the kinds", set: []string{"admissionPolicyExample.enabled=true"},
			want: "admissionPolicyExample.enabled needs kinds to serve configmaps"},
		{name: "the policy example with other kinds only", set: []string{"admissionPolicyExample.enabled=true",
			"kinds[0].group=rbac.authorization.k8s.io", "kinds[0].version=v1", "kinds[0].resource=rolebindings"},
			want: "admissionPolicyExample.enabled needs kinds to serve configmaps"},
		{name: "no image", set: []string{"image.repository="}, want: "/image/repository"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := template(t, namespace, tc.set...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template --set %v: error %v, want one saying %q", tc.set, err, tc.want)
			}
		})
	}
}

// TestImageTagIsAppVersion: without image.tag the image is the chart's
// appVersion, a version (not "dev").
func TestImageTagIsAppVersion(t *testing.T) {
	t.Parallel()
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	readYAML(t, "charts/implicit-apiserver/Chart.yaml", &chart)
	if chart.AppVersion == "" || chart.AppVersion == "dev" {
		t.Errorf("Chart.yaml's appVersion is %q, want a version", chart.AppVersion)
	}
	d := mustTemplate(t).get("Deployment", "implicit-apiserver")
	if d == nil {
		t.Fatal("no Deployment")
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	image, _, _ := unstructured.NestedString(containers[0].(map[string]any), "image")
	if want := "registry.example.com/implicit-apiserver:" + chart.AppVersion; image != want {
		t.Errorf("image %q, want %q", image, want)
	}
}

// TestReplicaDownAlert: ImplicitAPIServerReplicaDown fires on ready replicas
// below two (docs/operations.md): it counts the replicas that answer the
// scrape, since a replica that is not ready leaves the scrape targets and
// its up series vanishes rather than reading 0.
func TestReplicaDownAlert(t *testing.T) {
	t.Parallel()
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	readYAML(t, "charts/implicit-apiserver/files/prometheus-rules.yaml", &rules)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "ImplicitAPIServerReplicaDown" {
				continue
			}
			if !strings.Contains(r.Expr, `up{job="implicit-apiserver"} == 1`) || !strings.HasSuffix(strings.TrimSpace(r.Expr), "< 2") {
				t.Errorf("ImplicitAPIServerReplicaDown: %q, want the count of replicas that answer below 2", r.Expr)
			}
			return
		}
	}
	t.Error("no alert ImplicitAPIServerReplicaDown")
}
