package chart_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/cmd/server"
)

// TestSchemaRejectsTypos: values.schema.json refuses a misspelt or
// misplaced value, so that `helm template`, `helm lint` and `helm install`
// fail naming it instead of ignoring it; and accepts every value documented,
// the monitoring blocks of the dashboards and alerts included.
func TestSchemaRejectsTypos(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want string
		set        []string
	}{
		{name: "replica for replicas", set: []string{"replica=3"}, want: "'replica' not allowed"},
		{name: "image.repo", set: []string{"image.repo=x"}, want: "'repo' not allowed"},
		{name: "certificates.mdoe", set: []string{"certificates.mdoe=helm"}, want: "'mdoe' not allowed"},
		{name: "tls.existingSecret (the chart's is certificates.existingSecret)", set: []string{"tls.existingSecret=mine"}, want: "'tls' not allowed"},
		{name: "webhooks.clientCa", set: []string{"webhooks.clientCa.pem=x"}, want: "'clientCa' not allowed"},
		{name: "serviceMonitor.enable", set: []string{"serviceMonitor.enable=true"}, want: "'enable' not allowed"},
		{name: "a kind's resouce", set: []string{"kinds[0].group=example.com", "kinds[0].version=v1", "kinds[0].resource=things", "kinds[0].resouce=x"}, want: "'resouce' not allowed"},
		{name: "a kind's delivery misspelt", set: []string{"kinds[0].version=v1", "kinds[0].resource=things", "kinds[0].delivery=Materialise"}, want: "delivery"},
		{name: "replicas not a number", set: []string{"replicas=two"}, want: "replicas"},
		{name: "unknown rotation step", set: []string{"certificates.caRotation=start"}, want: "caRotation"},
		{name: "grafanaDashboard.enabled not a boolean", set: []string{"grafanaDashboard.enabled=yes"}, want: "enabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := template(t, namespace, tc.set...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template --set %v: error %v, want one containing %q", tc.set, err, tc.want)
			}
			args := []string{"lint", "--strict", chartDir, "--namespace", namespace, "--set", testImage}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			if out, err := runHelm(t, args...); err == nil {
				t.Errorf("helm lint --set %v passed:\n%s", tc.set, out)
			}
		})
	}
	t.Run("accepted", func(t *testing.T) {
		t.Parallel()
		mustTemplate(t, "grafanaDashboard.enabled=false", "grafanaDashboard.labels.team=observability",
			"prometheusRule.enabled=false", "prometheusRule.labels.release=prometheus", "prometheusRule.anything=else",
			"kinds[0].group=policy.example.com", "kinds[0].version=v1", "kinds[0].resource=guardrails", "kinds[0].strategy=Overlay",
			"kinds[0].globalNamespace=policies", "kinds[0].aggregateTo[0]=view", "kinds[0].delivery=Materialize")
	})
}

// schema is the part of values.schema.json the tests walk.
type schema struct {
	Type                 any                `json:"type"`
	Properties           map[string]*schema `json:"properties"`
	AdditionalProperties any                `json:"additionalProperties"`
	Items                *schema            `json:"items"`
	Ref                  string             `json:"$ref"`
	Definitions          map[string]*schema `json:"definitions"`
}

func readSchema(t *testing.T) *schema {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	return &s
}

// TestSchemaCoversValues: every value in values.yaml has a property in the
// schema (a value missing there would be refused), and the properties of a
// kinds entry are exactly the fields of the server's ResourceSelector.
func TestSchemaCoversValues(t *testing.T) {
	t.Parallel()
	s := readSchema(t)
	var values map[string]any
	readYAML(t, "charts/implicit-apiserver/values.yaml", &values)
	resolve := func(p *schema) *schema {
		if p != nil && strings.HasPrefix(p.Ref, "#/definitions/") {
			return s.Definitions[strings.TrimPrefix(p.Ref, "#/definitions/")]
		}
		return p
	}
	var walk func(prefix string, m map[string]any, sch *schema)
	walk = func(prefix string, m map[string]any, sch *schema) {
		for k, v := range m {
			p := resolve(sch.Properties[k])
			if p == nil {
				if sch.AdditionalProperties == false {
					t.Errorf("values.yaml has %s%s, which values.schema.json refuses", prefix, k)
				}
				continue
			}
			if sub, ok := v.(map[string]any); ok && p.Properties != nil {
				walk(prefix+k+".", sub, p)
			}
		}
	}
	walk("", values, s)

	item := s.Properties["kinds"].Items
	var fields []string
	rt := reflect.TypeFor[server.ResourceSelector]()
	for i := range rt.NumField() {
		fields = append(fields, strings.Split(rt.Field(i).Tag.Get("json"), ",")[0])
	}
	var props []string
	for k := range item.Properties {
		props = append(props, k)
	}
	sort.Strings(fields)
	sort.Strings(props)
	if !slices.Equal(fields, props) {
		t.Errorf("schema of a kinds entry has %v, the server's ResourceSelector %v", props, fields)
	}
	if item.AdditionalProperties != false {
		t.Error("schema of a kinds entry allows unknown fields")
	}
}

// TestImageRequired: the chart has no default image (it is published
// nowhere): rendering without image.repository fails saying how to make one.
func TestImageRequired(t *testing.T) {
	t.Parallel()
	// The values schema refuses it before any template renders (so that
	// helm lint --strict fails too, TestLintWithoutImage); values.yaml's
	// comment on the value says how to build and name the image.
	_, err := template(t, namespace, "image.repository=")
	if err == nil || !strings.Contains(err.Error(), "/image/repository") {
		t.Errorf("helm template without image.repository: %v, want a failure naming /image/repository", err)
	}
}

// TestExistingSecret: certificates.mode=existingSecret mounts your Secret,
// renders none of the chart's certificates, and puts the CA you give in
// every caBundle; without one (and no cluster to read the Secret's ca.crt
// from) rendering fails saying what to set.
func TestExistingSecret(t *testing.T) {
	t.Parallel()
	const pem = "-----BEGIN CERTIFICATE-----\nMIIBexample\n-----END CERTIFICATE-----\n"
	objs := mustTemplate(t, "certificates.mode=existingSecret", "certificates.existingSecret=my-tls", "certificates.caBundle="+pem,
		"serviceMonitor.enabled=true")
	for _, kind := range []string{"Secret", "Certificate", "Issuer"} {
		for _, o := range objs.ofKind(kind) {
			t.Errorf("%s %s rendered with an existing Secret", kind, o.GetName())
		}
	}
	var d struct {
		Spec struct {
			Template struct {
				Spec corev1.PodSpec `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	convert(t, objs.get("Deployment", "implicit-apiserver"), &d)
	found := false
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "serving-cert" {
			found = v.Secret != nil && v.Secret.SecretName == "my-tls"
		}
	}
	if !found {
		t.Errorf("the serving-cert volume is not the Secret my-tls: %+v", d.Spec.Template.Spec.Volumes)
	}
	if ca, _, _ := unstructured.NestedString(objs.get("APIService", "v1alpha1.implicit.dev").Object, "spec", "caBundle"); !strings.HasPrefix(decodePEM(t, ca), "-----BEGIN CERTIFICATE-----\nMIIBexample") {
		t.Errorf("APIService caBundle %q is not the given CA", ca)
	}
	hooks, _, _ := unstructured.NestedSlice(objs.get("ValidatingWebhookConfiguration", "implicit-apiserver").Object, "webhooks")
	for _, h := range hooks {
		if ca, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "caBundle"); decodePEM(t, ca) != pem {
			t.Errorf("webhook %v: caBundle is not the given CA", h.(map[string]any)["name"])
		}
	}
	if name, _, _ := unstructured.NestedString(objs.get("ServiceMonitor", "implicit-apiserver").Object, "spec", "endpoints", "0", "tlsConfig", "ca", "secret", "name"); name != "" && name != "my-tls" {
		t.Errorf("ServiceMonitor verifies with the Secret %q", name)
	}

	for _, tc := range []struct {
		set  []string
		want string
	}{
		{set: []string{"certificates.mode=existingSecret", "certificates.existingSecret=my-tls"}, want: "certificates.caBundle"},
		{set: []string{"certificates.mode=existingSecret"}, want: "certificates.existingSecret"},
		{set: []string{"certificates.mode=cert-manager", "certificates.caRotation=prepare"}, want: "caRotation"},
	} {
		if _, err := template(t, namespace, tc.set...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("helm template --set %v: %v, want a failure naming %s", tc.set, err, tc.want)
		}
	}
}

// TestHelmTestHook: `helm test` runs `implicit-apiserver check` from the
// chart's own image, with a ServiceAccount allowed exactly what it reads.
func TestHelmTestHook(t *testing.T) {
	t.Parallel()
	objs := mustTemplate(t, "image.tag=v9")
	var pod corev1.Pod
	convert(t, objs.get("Pod", "implicit-apiserver-test"), &pod)
	if pod.Annotations["helm.sh/hook"] != "test" {
		t.Errorf("test Pod hook %q, want test", pod.Annotations["helm.sh/hook"])
	}
	c := pod.Spec.Containers[0]
	if c.Image != "registry.example.com/implicit-apiserver:v9" || len(c.Args) == 0 || c.Args[0] != "check" {
		t.Errorf("test Pod runs %s %v, want the chart's image with check", c.Image, c.Args)
	}
	if pod.Spec.ServiceAccountName != "implicit-apiserver-test" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("test Pod: serviceAccount %q restartPolicy %q", pod.Spec.ServiceAccountName, pod.Spec.RestartPolicy)
	}
	for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		if o := objs.get(kind, "implicit-apiserver-test"); o == nil || o.GetAnnotations()["helm.sh/hook"] != "test" {
			t.Errorf("%s implicit-apiserver-test: missing, or not a test hook", kind)
		}
	}
}

// decodePEM decodes a base64 caBundle.
func decodePEM(t *testing.T, b64 string) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatalf("caBundle %q: %v", b64, err)
	}
	return string(raw)
}
