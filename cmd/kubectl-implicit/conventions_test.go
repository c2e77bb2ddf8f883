package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/version"
)

// runPlugin runs the plugin with args and returns its exit code, standard
// output and standard error.
func runPlugin(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(t.Context(), args, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return code, out.String(), errOut.String()
}

// TestDisplayName: help and usage lines name the plugin as kubectl runs
// it, and version and --version print the plugin's version.
func TestDisplayName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--help"}, "\n  kubectl implicit [command]\n"},
		{[]string{"rollout", "--help"}, "\n  kubectl implicit rollout status|promote|abort KIND NAME -n NAMESPACE [flags]\n"},
		{[]string{"why", "--help"}, "\n  kubectl implicit why KIND NAME [-n NAMESPACE] [flags]\n"},
		{[]string{"--version"}, "kubectl implicit version " + version.Version + "\n"},
		{[]string{"version"}, "kubectl implicit version " + version.Version + "\n"},
	} {
		code, out, errOut := runPlugin(t, tc.args...)
		if code != exitOK || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, output lacks %q:\n%s%s", tc.args, code, tc.want, out, errOut)
		}
		if strings.Contains(out, "kubectl version") || strings.Contains(out, "Usage:\n  kubectl [command]") || strings.Contains(out, "\n  kubectl rollout") {
			t.Errorf("%v: output names kubectl itself:\n%s", tc.args, out)
		}
	}
}

func testExplanation() *v1alpha1.Explanation {
	e := &v1alpha1.Explanation{
		TypeMeta:   metav1.TypeMeta{APIVersion: "implicit.dev/v1alpha1", Kind: "Explanation"},
		ObjectMeta: metav1.ObjectMeta{Name: "ci-bot", Namespace: "team-b", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Spec:       v1alpha1.ExplanationSpec{Resource: "rolebindings", Name: "ci-bot"},
		Status: v1alpha1.ExplanationStatus{Summary: "excluded", Scopes: []v1alpha1.ScopeExplanation{
			{Scope: "global", Namespace: "implicit-global", Outcome: "Excluded", By: "team-b"},
			{Scope: "local", Namespace: "team-b", Outcome: "NoItem"},
		}},
	}
	return e
}

// TestOutputFormats: -o takes kubectl's forms, printed by cli-runtime's
// printers (and custom columns), and refuses others before asking the
// server anything.
func TestOutputFormats(t *testing.T) {
	t.Parallel()
	list := &v1alpha1.HierarchyList{Items: []v1alpha1.Hierarchy{
		hierarchyOf("org", v1alpha1.HierarchyStatus{Tenant: true, Children: []string{"team"}}),
		hierarchyOf("team", v1alpha1.HierarchyStatus{Tenant: true, Ancestors: []string{"org"}}),
	}}
	for _, tc := range []struct {
		format string
		obj    func() any
		want   string
	}{
		{"name", func() any { return testExplanation() }, "explanation.implicit.dev/ci-bot\n"},
		{"jsonpath={.status.scopes[*].outcome}", func() any { return testExplanation() }, "Excluded NoItem"},
		{"jsonpath={.spec.name}", func() any { return testExplanation() }, "ci-bot"},
		{"go-template={{.spec.resource}}", func() any { return testExplanation() }, "rolebindings"},
		{"custom-columns=SCOPE:.status.scopes[*].scope,BY:{.status.scopes[0].by},NONE:.metadata.labels", func() any { return testExplanation() },
			"SCOPE          BY       NONE\nglobal,local   team-b   <none>\n"},
		{"yaml", func() any { return testExplanation() }, "apiVersion: implicit.dev/v1alpha1\nkind: Explanation\nmetadata:\n  name: ci-bot\n  namespace: team-b\nspec:\n"},
		{"json", func() any { return testExplanation() }, "{\n    \"kind\": \"Explanation\",\n    \"apiVersion\": \"implicit.dev/v1alpha1\",\n    \"metadata\": {\n        \"name\": \"ci-bot\",\n        \"namespace\": \"team-b\"\n    },"},
		{"custom-columns=NS:.metadata.name,PARENT:.status.ancestors[0]", func() any {
			l := list.DeepCopy()
			l.APIVersion, l.Kind = "implicit.dev/v1alpha1", "HierarchyList"
			return l
		}, "NS     PARENT\norg    <none>\nteam   org\n"},
		{"jsonpath={.count}", func() any { return Reach{APIVersion: "implicit.dev/v1alpha1", Kind: "Reach", Count: 3} }, "3"},
	} {
		if err := validateOutput(tc.format); err != nil {
			t.Errorf("-o %s: %v", tc.format, err)
			continue
		}
		var out bytes.Buffer
		if err := printObject(&out, tc.format, tc.obj()); err != nil {
			t.Errorf("-o %s: %v", tc.format, err)
			continue
		}
		if !strings.HasPrefix(out.String(), tc.want) {
			t.Errorf("-o %s: got\n%s\nwant (a prefix)\n%s", tc.format, out.String(), tc.want)
		}
		if strings.Contains(out.String(), "managedFields") {
			t.Errorf("-o %s prints managedFields:\n%s", tc.format, out.String())
		}
	}
	for _, ok := range []string{"", "wide", "kyaml", "jsonpath-as-json={.a}"} {
		if err := validateOutput(ok); err != nil {
			t.Errorf("-o %q: %v", ok, err)
		}
	}
	for _, bad := range []string{"xml", "jsonpath={.a", "custom-columns=", "custom-columns=NAME", "go-template={{.a"} {
		if err := validateOutput(bad); err == nil {
			t.Errorf("-o %q accepted", bad)
		}
	}
}

// TestPrintHierarchiesName: tree -o name prints hierarchy.implicit.dev/NS
// for each namespace (the list's items get their kind).
func TestPrintHierarchiesName(t *testing.T) {
	t.Parallel()
	list := &v1alpha1.HierarchyList{Items: []v1alpha1.Hierarchy{hierarchyOf("org", v1alpha1.HierarchyStatus{}), hierarchyOf("team", v1alpha1.HierarchyStatus{})}}
	var out bytes.Buffer
	if err := printHierarchies(&out, "name", list); err != nil {
		t.Fatal(err)
	}
	if want := "hierarchy.implicit.dev/org\nhierarchy.implicit.dev/team\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

// fakeServer serves discovery as a host with implicit-apiserver does (the
// source kinds, their views, a CRD's, with their short names) and answers
// an explanation with a warning.
func fakeServer(t *testing.T) *httptest.Server {
	t.Helper()
	resources := func(gv string, rs ...metav1.APIResource) any {
		return metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv, APIResources: rs}
	}
	res := func(name, singular, kind string, short ...string) metav1.APIResource {
		return metav1.APIResource{Name: name, SingularName: singular, Kind: kind, Namespaced: true, ShortNames: short, Verbs: metav1.Verbs{"get", "list"}}
	}
	group := func(name, version string) metav1.APIGroup {
		gv := metav1.GroupVersionForDiscovery{GroupVersion: name + "/" + version, Version: version}
		return metav1.APIGroup{Name: name, Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv}
	}
	paths := map[string]any{
		"/api":    metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}},
		"/api/v1": resources("v1", metav1.APIResource{Name: "namespaces", SingularName: "namespace", Kind: "Namespace", ShortNames: []string{"ns"}, Verbs: metav1.Verbs{"get"}}),
		"/apis": metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{
			group("rbac.authorization.k8s.io", "v1"), group("networking.k8s.io", "v1"), group("policy.example.com", "v1"), group("implicit.dev", "v1alpha1"),
		}},
		"/apis/rbac.authorization.k8s.io/v1": resources("rbac.authorization.k8s.io/v1", res("rolebindings", "rolebinding", "RoleBinding"), res("roles", "role", "Role")),
		"/apis/networking.k8s.io/v1":         resources("networking.k8s.io/v1", res("networkpolicies", "networkpolicy", "NetworkPolicy", "netpol")),
		"/apis/policy.example.com/v1":        resources("policy.example.com/v1", res("guardrails", "guardrail", "Guardrail", "gr")),
		"/apis/implicit.dev/v1alpha1": resources("implicit.dev/v1alpha1",
			res("rolebindings", "rolebinding", "RoleBinding"), res("roles", "role", "Role"),
			res("networkpolicies", "networkpolicy", "NetworkPolicy"), res("guardrails", "guardrail", "Guardrail"),
			res("explanations", "explanation", "Explanation"), res("hierarchies", "hierarchy", "Hierarchy"), res("previews", "preview", "Preview")),
		"/api/v1/namespaces": map[string]any{"apiVersion": "v1", "kind": "NamespaceList", "metadata": map[string]any{},
			"items": []any{map[string]any{"metadata": map[string]any{"name": "team-a"}}, map[string]any{"metadata": map[string]any{"name": "team-b"}}}},
		"/apis/implicit.dev/v1alpha1/namespaces/team-b/rolebindings": map[string]any{"apiVersion": "implicit.dev/v1alpha1", "kind": "RoleBindingList", "metadata": map[string]any{},
			"items": []any{map[string]any{"metadata": map[string]any{"name": "ci-bot", "namespace": "team-b"}}, map[string]any{"metadata": map[string]any{"name": "org-viewers", "namespace": "team-b"}}}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/explanations") {
			var e v1alpha1.Explanation
			b, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(b, &e)
			e.Namespace = strings.Split(r.URL.Path, "/")[5]
			e.Status.Summary = e.Spec.Resource + "/" + e.Spec.Name + " explained"
			w.Header().Add("Warning", `299 - "a guard warns: this reaches 3 namespaces"`)
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(e)
			return
		}
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/rolebindings") && r.URL.Query().Get("dryRun") == "All" {
			// diff's dry run of kubectl apply's create: the object as the
			// server would store it (this fake holds no sources).
			b, _ := io.ReadAll(r.Body)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(b)
			return
		}
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/previews") {
			answerPreview(w, r)
			return
		}
		body, ok := paths[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// serverFlags point the plugin at srv, with an empty kubeconfig and a
// discovery cache of the test's own.
func serverFlags(t *testing.T, srv *httptest.Server) []string {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--server=" + srv.URL, "--kubeconfig=" + kubeconfig, "--cache-dir=" + t.TempDir()}
}

// TestAbbreviations: KIND resolves through discovery to its view: the
// view's names, its source's short names (netpol, a CRD's gr) and the
// abbreviations users type that Kubernetes publishes none for (rb, np).
func TestAbbreviations(t *testing.T) {
	t.Parallel()
	srv := fakeServer(t)
	flags := serverFlags(t, srv)
	o := &options{config: genericclioptions.NewConfigFlags(true)}
	server, kubeconfig, cacheDir := srv.URL, strings.TrimPrefix(flags[1], "--kubeconfig="), strings.TrimPrefix(flags[2], "--cache-dir=")
	o.config.APIServer, o.config.KubeConfig, o.config.CacheDir = &server, &kubeconfig, &cacheDir
	for kind, want := range map[string]string{
		"rb": "rolebindings", "rolebinding": "rolebindings", "RoleBindings": "rolebindings", "rolebindings.implicit.dev": "rolebindings",
		"role": "roles", "roles": "roles",
		"netpol": "networkpolicies", "np": "networkpolicies", "networkpolicy": "networkpolicies",
		"gr": "guardrails", "guardrail": "guardrails",
	} {
		got, err := o.viewResource(kind)
		if err != nil || got != want {
			t.Errorf("viewResource(%q) = %q, %v; want %q", kind, got, err, want)
		}
	}
	if got, err := o.viewResource("pods"); err == nil {
		t.Errorf("viewResource(pods) = %q, want an error", got)
	}
}

// TestWarnings: a warning of the server (a guard's) prints as kubectl
// prints it, "Warning: ..." on standard error, not as a klog line; and an
// abbreviation reaches the view through the whole command.
func TestWarnings(t *testing.T) {
	t.Parallel()
	srv := fakeServer(t)
	args := append([]string{"why", "rb", "ci-bot", "-n", "team-b"}, serverFlags(t, srv)...)
	code, out, errOut := runPlugin(t, args...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if !strings.HasPrefix(out, "rolebindings/ci-bot explained.") {
		t.Errorf("output %q: want the explanation of rolebindings/ci-bot", out)
	}
	if want := "Warning: a guard warns: this reaches 3 namespaces\n"; errOut != want {
		t.Errorf("standard error %q, want %q", errOut, want)
	}
	code, out, errOut = runPlugin(t, append(args, "-o", "name")...)
	if code != exitOK || out != "explanation.implicit.dev/ci-bot\n" {
		t.Errorf("-o name: exit %d, output %q (%s)", code, out, errOut)
	}
}
