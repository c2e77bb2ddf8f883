package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestPluginConventions runs kubectl implicit as users type it, the binary
// found on PATH, on kubectl's conventions: its name and version; every -o
// form; the abbreviations rb and np; a tenant's --as; completion through
// kubectl __complete and kubectl_complete-implicit; a candidate's reach,
// why and diff (re-applying it exits 0, a change shows a field diff);
// --dry-run=server; and a guard's warning printed as kubectl prints it.
//
//	implicit-global  pv-bind (and, for the promotion, its candidate pv-bind.next)
//	pv-org
//	└── pv-team      implicit.dev/stage=canary
func TestPluginConventions(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	createNamespace(t, kube, "pv-org", nil, nil)
	createNamespace(t, kube, "pv-team", map[string]string{"implicit.dev/parent": "pv-org", v1alpha1.LabelStage: "canary"}, nil)
	createRoleBinding(t, kube, globalNS, "pv-bind", "view", "pv:stable")
	u := pluginUser{t: t, name: "admin", path: buildPlugin(t), kubeconfig: cp.KubeconfigPath(), home: t.TempDir()}
	is := func(want string) func(pluginRun) error {
		return func(r pluginRun) error {
			if r.stdout != want {
				return fmt.Errorf("output %q, want %q", r.stdout, want)
			}
			return nil
		}
	}
	matches := func(patterns ...string) func(pluginRun) error {
		return func(r pluginRun) error {
			for _, p := range patterns {
				if !regexp.MustCompile(p).MatchString(r.stdout) {
					return fmt.Errorf("no match for %q", p)
				}
			}
			return nil
		}
	}

	t.Log("its name and version")
	u.expect(0, matches(`^kubectl implicit version \S+\n$`), "version")
	u.expect(0, matches(`^kubectl implicit version \S+\n$`), "--version")
	u.expect(0, matches(`\n  kubectl implicit why KIND NAME`), "why", "--help")

	t.Log("-o name, with the abbreviation rb")
	u.expect(0, is("explanation.implicit.dev/pv-bind\n"), "why", "rb", "pv-bind", "-n", "pv-team", "-o", "name")
	u.expect(0, matches(`(?m)^namespace/pv-org$`, `(?m)^namespace/pv-team$`), "reach", "rb", "pv-bind", "-n", globalNS, "-o", "name")
	u.expect(0, is("hierarchy.implicit.dev/pv-org\nhierarchy.implicit.dev/pv-team\n"), "tree", "pv-org", "-o", "name")

	t.Log("-o jsonpath, with the abbreviation np and the source kind's short name netpol")
	u.expect(0, is("networkpolicies"), "why", "np", "pv-bind", "-n", "pv-team", "-o", "jsonpath={.spec.resource}")
	u.expect(0, is("networkpolicies"), "why", "netpol", "pv-bind", "-n", "pv-team", "-o", "jsonpath={.spec.resource}")
	u.expect(0, is("pv-org pv-team"), "tree", "pv-org", "-o", "jsonpath={.items[*].metadata.name}")
	u.expect(0, is("Won"), "why", "rolebinding", "pv-bind", "-n", "pv-team", "-o", "jsonpath={.status.scopes[0].outcome}")

	t.Log("-o custom-columns and -o wide")
	u.expect(0, matches(`^NAMESPACE\s+PARENT\npv-org\s+<none>\npv-team\s+pv-org\n$`), "tree", "pv-org", "-o", "custom-columns=NAMESPACE:.metadata.name,PARENT:.status.parent")
	u.expect(0, matches(`^rolebindings/pv-bind of implicit-global reaches \d+ namespace\(s\)\.\nNAMESPACE\s+AS\s+SCOPE\s+ITEM\s+CANDIDATE\s+OVERLAYS\n`, `(?m)^pv-team\s+source\s+global\s+pv-bind\s+<none>\s+<none>$`),
		"reach", "rb", "pv-bind", "-n", globalNS, "-o", "wide")
	u.expect(0, matches(`(?m)^NAMESPACE\s+AS\s+SCOPE\n`, `(?m)^pv-team\s+source\s+global$`), "reach", "rb", "pv-bind", "-n", globalNS)
	u.expect(0, matches(`(?m)^global\s+implicit-global\s+pv-bind\s+false\s+Won\s`), "why", "rb", "pv-bind", "-n", "pv-team", "-o", "wide")

	t.Log("the other -o forms: yaml, json, go-template; tree -o wide")
	u.expect(0, matches(`(?m)^kind: Explanation$`, `(?m)^  name: pv-bind$`), "why", "rb", "pv-bind", "-n", "pv-team", "-o", "yaml")
	u.expect(0, func(r pluginRun) error {
		var e struct{ Kind string }
		if err := decode(r, &e); err != nil || e.Kind != "Explanation" {
			return fmt.Errorf("-o json: %v, kind %q", err, e.Kind)
		}
		return nil
	}, "why", "rb", "pv-bind", "-n", "pv-team", "-o", "json")
	u.expect(0, is("pv-bind"), "why", "rb", "pv-bind", "-n", "pv-team", "-o", "go-template={{.spec.name}}")
	u.expect(0, matches(`^NAMESPACE\s+TENANT\s+PARENT\s+ANCESTORS\s+CHILDREN\s+PROBLEMS\n`, `(?m)^pv-org\s+yes\s+<none>\s+0\s+1\s`, `(?m)^└── pv-team\s+yes\s+pv-org\s+1\s+0\s`),
		"tree", "pv-org", "-o", "wide")

	t.Log("the tenant half as typed: --as a user bound in pv-team only")
	asker := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-asker"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"implicit.dev"}, Resources: []string{"explanations"}, Verbs: []string{"create"}},
			{APIGroups: []string{"implicit.dev"}, Resources: []string{"rolebindings"}, Verbs: []string{"get", "list"}},
		},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(t.Context(), asker, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoles().Delete(context.Background(), asker.Name, metav1.DeleteOptions{})
	})
	gdBindUser(t, kube, "pv-team", "pv-asker", "ClusterRole", asker.Name, "pv-tenant")
	u.expect(0, matches(`^rolebindings/pv-bind is in the view of pv-team from the global source implicit-global/pv-bind`), "why", "rb", "pv-bind", "-n", "pv-team", "--as=pv-tenant")
	u.expect(1, func(r pluginRun) error {
		if !strings.Contains(r.stderr, "Error from server (Forbidden)") {
			return fmt.Errorf("stderr %q, want Forbidden", r.stderr)
		}
		return nil
	}, "why", "rb", "pv-bind", "-n", "pv-org", "--as=pv-tenant")
	u.expect(1, func(r pluginRun) error {
		if !strings.Contains(r.stderr, `namespaces "pv-nosuch" not found`) {
			return fmt.Errorf("stderr %q, want the namespace not found", r.stderr)
		}
		return nil
	}, "why", "rb", "pv-bind", "-n", "pv-nosuch")

	t.Log("completion as kubectl asks it: kubectl __complete runs kubectl_complete-implicit from PATH")
	completes := func(want ...string) func(pluginRun) error {
		return func(r pluginRun) error {
			lines := map[string]bool{}
			for _, l := range strings.Split(r.stdout, "\n") {
				name, _, _ := strings.Cut(l, "\t")
				lines[name] = true
			}
			for _, w := range want {
				if !lines[w] {
					return fmt.Errorf("no completion %q", w)
				}
			}
			return nil
		}
	}
	u.expectKubectl(0, completes("tree", "why", "reach", "diff", "rollout", "can-i"), "__complete", "implicit", "")
	u.expectKubectl(0, completes("rb", "rolebindings", "np", "netpol", "networkpolicies"), "__complete", "implicit", "why", "")
	u.expectKubectl(0, completes("pv-bind"), "__complete", "implicit", "why", "-n", "pv-team", "rb", "pv-")
	u.expectKubectl(0, completes("pv-org", "pv-team"), "__complete", "implicit", "tree", "pv-")

	t.Log("a candidate: reach and diff understand it")
	createRoleBinding(t, kube, globalNS, "pv-bind.next", "view", "pv:next", candidateOf("pv-bind", v1alpha1.LabelStage+"=canary"))
	waitForVersions(t, dyn, "pv-team sees the candidate", "pv-bind", map[string]rbVersion{"pv-team": {group: "pv:next", candidate: "pv-bind.next"}})
	u.expect(0, matches(`(?m)^pv-team\s+candidate\s+global\s+pv-bind\s+pv-bind\.next\s`, `(?m)^pv-org\s+source\s+global\s+pv-bind\s+<none>\s`),
		"reach", "rb", "pv-bind", "-n", globalNS, "-o", "wide")
	u.expect(0, matches(`(?m)^pv-team\s+candidate\s+global$`), "reach", "rb", "pv-bind.next", "-n", globalNS)
	u.expect(0, matches(`is not an item of the view of pv-team: the source implicit-global/pv-bind\.next is a candidate for implicit-global/pv-bind`),
		"why", "rb", "pv-bind.next", "-n", "pv-team")
	noop := u.shell(t.Context(), "kubectl get rolebinding pv-bind.next -n "+globalNS+" -o yaml | kubectl implicit diff -f -")
	t.Logf("$ kubectl get rolebinding pv-bind.next -o yaml | kubectl implicit diff -f -  (exit %d)\n%s%s", noop.code, noop.stdout, noop.stderr)
	if noop.code != 0 || !strings.Contains(noop.stdout, "(Update): reaches") || !strings.Contains(noop.stdout, "changes 0") || strings.Contains(noop.stdout, "diff -u") {
		t.Errorf("re-applying the live candidate: exit %d, want 0 and no change", noop.code)
	}
	changed := filepath.Join(t.TempDir(), "pv-bind.next.yaml")
	if err := os.WriteFile(changed, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: pv-bind.next
  namespace: `+globalNS+`
  annotations:
    `+v1alpha1.AnnotationCandidateFor+`: pv-bind
    `+v1alpha1.AnnotationCanarySelector+`: `+v1alpha1.LabelStage+`=canary
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "pv:next"}
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "pv:extra"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	u.expect(1, matches(`(?m)^pv-team\s+Modified\s`, `(?m)^diff -u rolebindings\.implicit\.dev/pv-bind in (.*, )?pv-team(,|$)`, `(?m)^\+  name: pv:extra$`),
		"diff", "-f", changed)

	t.Log("rollout promote --dry-run=server: the guards judge both writes and warn; nothing changes")
	dry := u.run(t.Context(), "rollout", "promote", "rb", "pv-bind", "-n", globalNS, "--dry-run=server")
	t.Logf("$ kubectl implicit rollout promote rb pv-bind -n %s --dry-run=server  (exit %d)\n%s%s", globalNS, dry.code, dry.stdout, dry.stderr)
	if dry.code != 0 || !strings.Contains(dry.stdout, "(server dry run)") || strings.Contains(dry.stdout, "managedFields") ||
		!regexp.MustCompile(`(?m)^Warning: implicit\.dev: this change reaches \d+ namespaces$`).MatchString(dry.stderr) {
		t.Errorf("a server dry run: exit %d, want 0, \"(server dry run)\", no managedFields and the guard's warning", dry.code)
	}
	waitForVersions(t, dyn, "pv-team still sees the candidate", "pv-bind", map[string]rbVersion{"pv-team": {group: "pv:next", candidate: "pv-bind.next"}})

	t.Log("a guard's warning prints as kubectl's: the promotion updates a global source, which reaches every tenant")
	r := u.run(t.Context(), "rollout", "promote", "rb", "pv-bind", "-n", globalNS)
	t.Logf("$ kubectl implicit rollout promote rb pv-bind -n %s  (exit %d)\n%s%s", globalNS, r.code, r.stdout, r.stderr)
	if r.code != 0 {
		t.Fatalf("promote: exit %d", r.code)
	}
	if !regexp.MustCompile(`(?m)^Warning: implicit\.dev: this change reaches \d+ namespaces$`).MatchString(r.stderr) || strings.Contains(r.stderr, "warnings.go") {
		t.Errorf("standard error %q: want the guard's warning as kubectl prints it, \"Warning: ...\"", r.stderr)
	}
}

// shell runs script with sh as the user types it (a pipe), kubectl and the
// plugin found on u's PATH.
func (u pluginUser) shell(ctx context.Context, script string) pluginRun {
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+u.path, "KUBECONFIG="+u.kubeconfig, "HOME="+u.home)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	r := pluginRun{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		r.code, r.stderr = -1, err.Error()
	}
	return r
}
