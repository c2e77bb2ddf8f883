package integration

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

// repoRoot is where the artifacts are, seen from this package.
var repoRoot = filepath.Join("..", "..")

// TestArtifactsDryRun keeps artifacts/ valid against the real kube-apiserver.
func TestArtifactsDryRun(t *testing.T) {
	for _, dir := range []string{"artifacts/base", "artifacts/overlays/single-replica"} {
		t.Logf("kubectl apply --dry-run=server -k %s", dir)
		out, _, err := cp.Kubectl(t.Context(), "apply", "--dry-run=server", "-k", filepath.Join(repoRoot, dir))
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		for _, want := range []string{"deployment.apps/implicit-apiserver", "apiservice.apiregistration.k8s.io/v1alpha1.implicit.dev", "clusterrole.rbac.authorization.k8s.io/implicit-viewer"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: no %s in\n%s", dir, want, out)
			}
		}
	}
	t.Log("overlays/cert-manager and overlays/dev need cert-manager's CRDs: render them only")
	if _, _, err := cp.Kubectl(t.Context(), "kustomize", filepath.Join(repoRoot, "artifacts/overlays/cert-manager")); err != nil {
		t.Errorf("%v", err)
	}
	t.Log("the components combine: overlays/dev uses both cert-manager and single-replica")
	out, _, err := cp.Kubectl(t.Context(), "kustomize", filepath.Join(repoRoot, "artifacts/overlays/dev"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		if k, ok := strings.CutPrefix(line, "kind: "); ok {
			kinds[k]++
		}
	}
	if kinds["Certificate"] != 2 || kinds["Issuer"] != 2 {
		t.Errorf("overlays/dev renders %d Certificates and %d Issuers, want cert-manager's 2 and 2", kinds["Certificate"], kinds["Issuer"])
	}
	if kinds["PodDisruptionBudget"] != 0 {
		t.Errorf("overlays/dev renders a PodDisruptionBudget; single-replica removes it")
	}
	if !strings.Contains(out, "\n  replicas: 1\n") || strings.Contains(out, "\n  replicas: 2\n") {
		t.Errorf("overlays/dev: the Deployment does not run one replica:\n%s", out)
	}
}

// TestExamples applies artifacts/examples, as make run does, and checks the
// views its README promises.
func TestExamples(t *testing.T) {
	kube, _ := admin(t)
	dir := filepath.Join(repoRoot, "artifacts/examples")
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	// make run applies the examples before it registers the guards: team-a
	// shadows a locked item on purpose, which the shadow guard would refuse.
	withoutGuards(t, func() {
		t.Log("applying the examples with the guards unregistered, as make run does")
		if _, _, err := cp.Kubectl(t.Context(), "apply", "-R", "-f", dir); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() {
		// Delete the sources first, then the namespaces the examples own
		// (the global namespace stays: other tests use it).
		for _, sub := range []string{"10-implicit-global", "20-org-platform", "30-team-a", "30-team-b", "40-sandbox"} {
			cp.Kubectl(context.Background(), "delete", "--ignore-not-found", "-R", "-f", filepath.Join(dir, sub))
		}
		for _, ns := range []string{"org-platform", "team-a", "team-b", "sandbox"} {
			if err := kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s: %v", ns, err)
			}
		}
	})

	rows := map[string][]string{
		"team-a": {
			`ci-bot\s+ClusterRole/edit\s+ServiceAccount/ci/ci-bot\s+global\s+implicit-global`,
			`org-security-auditors\s+ClusterRole/view\s+Group/org:security\s+global\s+implicit-global`,
			`org-viewers\s+ClusterRole/view\s+Group/platform:viewers\s+parent\s+org-platform`,
			`platform-admins\s+ClusterRole/admin\s+Group/platform:admins\s+parent\s+org-platform`,
			`team-a-devs\s+ClusterRole/edit\s+Group/team-a:devs\s+local\s+team-a`,
		},
		"team-b": {
			`org-security-auditors\s+ClusterRole/view\s+Group/org:security\s+global\s+implicit-global`,
			`org-viewers\s+ClusterRole/view\s+Group/platform:viewers\s+parent\s+org-platform`,
			`platform-admins\s+ClusterRole/admin\s+Group/platform:admins\s+parent\s+org-platform`,
		},
		"sandbox": {
			`sandbox-admins\s+ClusterRole/admin\s+Group/sandbox:admins\s+local\s+sandbox`,
		},
	}
	for ns, want := range rows {
		var out string
		eventually(t, "the examples' view of "+ns, func(ctx context.Context) error {
			var err error
			out, _, err = cp.Kubectl(ctx, "get", "rolebindings.implicit.dev", "-n", ns, "--no-headers")
			if err != nil {
				return err
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != len(want) {
				return errorf("%d rows, want %d:\n%s", len(lines), len(want), out)
			}
			for i, w := range want {
				if !regexp.MustCompile(`^` + w).MatchString(lines[i]) {
					return errorf("row %d %q does not match %q", i, lines[i], w)
				}
			}
			return nil
		})
		t.Logf("kubectl get rolebindings.implicit.dev -n %s\n%s", ns, out)
	}
	out, _, err := cp.Kubectl(t.Context(), "get", "networkpolicies.implicit.dev", "-n", "team-b", "--no-headers")
	if err != nil || !regexp.MustCompile(`allow-same-namespace\s.*local\s+team-b`).MatchString(out) || !regexp.MustCompile(`default-deny-ingress\s.*global\s+implicit-global`).MatchString(out) {
		t.Errorf("networkpolicies in team-b: %v\n%s", err, out)
	}
}

// TestWebhookArtifact keeps artifacts/base's webhook configuration equal to
// what the code generates (hack/gen-webhooks).
func TestWebhookArtifact(t *testing.T) {
	checkGenerated(t, "artifacts/base/validatingwebhookconfiguration.yaml", webhookconfig.InClusterConfiguration(), "go run ./hack/gen-webhooks")
}

// checkGenerated fails the test unless the YAML file at path (from the
// repository's root) decodes strictly to want, which gen writes.
func checkGenerated[T any](t *testing.T, path string, want *T, gen string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	var got T
	if err := yaml.UnmarshalStrict(raw, &got); err != nil {
		t.Fatal(err)
	}
	if !apiequality.Semantic.DeepEqual(&got, want) {
		t.Errorf("%s is out of date: run %s > %s", path, gen, path)
	}
}

// TestAuthorizationArtifact keeps the documented AuthorizationConfiguration
// snippet's match condition equal to the code's.
func TestAuthorizationArtifact(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "artifacts/authorization/authorization-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := authz.MatchCondition(globalNS, []string{"kube-system", "kube-public", "kube-node-lease"})
	if !strings.Contains(string(raw), want) {
		t.Errorf("artifacts/authorization/authorization-config.yaml: the match condition is not\n%s", want)
	}
}

// TestUnlockIsNeverAggregated checks that no aggregated default role, nor any
// role artifacts/base aggregates into them, contains the unlock verb: it is
// granted deliberately, never by default.
func TestUnlockIsNeverAggregated(t *testing.T) {
	kube, _ := admin(t)
	out, _, err := cp.Kubectl(t.Context(), "kustomize", filepath.Join(repoRoot, "artifacts/base"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(out, "\n---\n") {
		var cr rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &cr); err != nil || cr.Kind != "ClusterRole" {
			continue
		}
		for _, rule := range cr.Rules {
			if slices.Contains(rule.Verbs, admission.UnlockVerb) || slices.Contains(rule.Verbs, "*") {
				t.Errorf("artifacts/base ClusterRole %s grants %v", cr.Name, rule.Verbs)
			}
		}
	}
	eventually(t, "the aggregated roles have rules", func(ctx context.Context) error {
		for _, name := range []string{"admin", "edit", "view"} {
			cr, err := kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(cr.Rules) == 0 {
				return errorf("ClusterRole %s has no rules yet", name)
			}
			for _, rule := range cr.Rules {
				if slices.Contains(rule.Verbs, admission.UnlockVerb) || slices.Contains(rule.Verbs, "*") {
					t.Errorf("aggregated ClusterRole %s grants %v on %v", name, rule.Verbs, rule.Resources)
				}
			}
		}
		return nil
	})
}

// TestAuthorizationDocsPaths keeps the docs and artifacts/authorization in
// agreement on where the files go: every path on the control-plane nodes that
// a file in artifacts/authorization refers to (kubeconfigs, certificates) is
// one the docs tell the operator to create, and every kubeconfig path the
// docs name is one a configuration file uses.
func TestAuthorizationDocsPaths(t *testing.T) {
	pathRE := regexp.MustCompile(`/etc/kubernetes/[A-Za-z0-9._/-]*[A-Za-z0-9]`)
	read := func(rel string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(repoRoot, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	files, err := filepath.Glob(filepath.Join(repoRoot, "artifacts/authorization/*"))
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]string{} // path -> the artifact that uses it
	for _, f := range files {
		if strings.HasSuffix(f, ".md") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pathRE.FindAllString(string(b), -1) {
			used[p] = filepath.Base(f)
		}
	}
	if len(used) == 0 {
		t.Fatal("no /etc/kubernetes path in artifacts/authorization: the test checks nothing")
	}
	docs := read("docs/install.md") + read("artifacts/authorization/README.md")
	// The README says where the files it lists go: "(/etc/kubernetes/)".
	for p, artifact := range used {
		base := strings.TrimPrefix(p, "/etc/kubernetes/")
		if !strings.Contains(docs, p) && !strings.Contains(docs, "`"+base+"`") {
			t.Errorf("%s uses %s, which neither docs/install.md nor artifacts/authorization/README.md tells the operator to create", artifact, p)
		}
	}
	for _, p := range pathRE.FindAllString(docs, -1) {
		if strings.HasSuffix(p, ".kubeconfig") {
			if _, ok := used[p]; !ok {
				t.Errorf("the docs name %s, which no file in artifacts/authorization uses", p)
			}
		}
	}
}
