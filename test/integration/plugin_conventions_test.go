package integration

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// TestPluginConventions runs kubectl implicit as users type it, the binary
// found on PATH, on kubectl's conventions: its name and version; -o name,
// jsonpath, custom-columns and wide; the abbreviations rb and np; and a
// guard's warning printed as kubectl prints it.
//
//	implicit-global  pv-bind (and, for the promotion, its candidate pv-bind.next)
//	pv-org
//	└── pv-team      implicit.dev/stage=canary
func TestPluginConventions(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	createNamespace(t, kube, "pv-org", nil, nil)
	createNamespace(t, kube, "pv-team", map[string]string{"implicit.dev/parent": "pv-org", merge.LabelStage: "canary"}, nil)
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
	u.expect(0, matches(`^rolebindings/pv-bind of implicit-global reaches \d+ namespace\(s\)\.\nNAMESPACE\s+AS\s+SCOPE\n`, `(?m)^pv-team\s+source\s+global$`),
		"reach", "rb", "pv-bind", "-n", globalNS, "-o", "wide")
	u.expect(0, matches(`(?m)^global\s+implicit-global\s+pv-bind\s+false\s+Won\s`), "why", "rb", "pv-bind", "-n", "pv-team", "-o", "wide")

	t.Log("a guard's warning prints as kubectl's: the promotion updates a global source, which reaches every tenant")
	createRoleBinding(t, kube, globalNS, "pv-bind.next", "view", "pv:next", candidateOf("pv-bind", merge.LabelStage+"=canary"))
	waitForVersions(t, dyn, "pv-team sees the candidate", "pv-bind", map[string]rbVersion{"pv-team": {group: "pv:next", candidate: "pv-bind.next"}})
	r := u.run(t.Context(), "rollout", "promote", "rb", "pv-bind", "-n", globalNS)
	t.Logf("$ kubectl implicit rollout promote rb pv-bind -n %s  (exit %d)\n%s%s", globalNS, r.code, r.stdout, r.stderr)
	if r.code != 0 {
		t.Fatalf("promote: exit %d", r.code)
	}
	if !regexp.MustCompile(`(?m)^Warning: implicit\.dev: this change reaches \d+ namespaces$`).MatchString(r.stderr) || strings.Contains(r.stderr, "warnings.go") {
		t.Errorf("standard error %q: want the guard's warning as kubectl prints it, \"Warning: ...\"", r.stderr)
	}
}
