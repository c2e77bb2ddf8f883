package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// dkRBAC is a RoleBinding manifest of the diff table.
func dkRBAC(namespace, name, extraMeta, role, group string) string {
	return fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: %s
  namespace: %s
%sroleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: %s
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: Group
  name: %s
`, name, namespace, extraMeta, role, group)
}

// dkNamespace is a Namespace manifest with the labels given as YAML lines.
func dkNamespace(name, labels string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n%s", name, labels)
}

// kubectlDiff runs the real `kubectl diff args...` with an external diff
// program that keeps the LIVE and MERGED directories (what kubectl apply
// would store, as kubectl computed it) and diffs as kubectl's default does;
// it returns the exit code and the live and merged objects by file name.
func kubectlDiff(t *testing.T, u pluginUser, stdin string, args ...string) (code int, live, merged map[string]map[string]any, said string) {
	t.Helper()
	keep := t.TempDir()
	for _, d := range []string{"live", "merged"} {
		if err := os.Mkdir(filepath.Join(keep, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(t.TempDir(), "keep-diff")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ncp -r \"$1\"/. \""+keep+"/live\"/\ncp -r \"$2\"/. \""+keep+"/merged\"/\nexec diff -u -N -r \"$1\" \"$2\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "kubectl", append([]string{"diff"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+u.kubeconfig, "HOME="+u.home, "KUBECTL_EXTERNAL_DIFF="+script)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("kubectl diff: %v", err)
	}
	read := func(dir string) map[string]map[string]any {
		objs := map[string]map[string]any{}
		entries, _ := os.ReadDir(filepath.Join(keep, dir))
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(keep, dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			var obj map[string]any
			if err := yaml.Unmarshal(b, &obj); err != nil {
				t.Fatal(err)
			}
			if obj != nil {
				objs[e.Name()] = obj
			}
		}
		return objs
	}
	return code, read("live"), read("merged"), out.String() + errOut.String()
}

// dkContent is what a view item shows of a source object, as previews
// report it: labels, annotations but kubectl's last-applied, every field
// but apiVersion, kind and the rest of metadata.
func dkContent(obj map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range obj {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			out[k] = v
		}
	}
	md, _ := obj["metadata"].(map[string]any)
	kept := map[string]any{}
	if l, ok := md["labels"].(map[string]any); ok && len(l) > 0 {
		kept["labels"] = l
	}
	if a, ok := md["annotations"].(map[string]any); ok {
		delete(a, "kubectl.kubernetes.io/last-applied-configuration")
		if len(a) > 0 {
			kept["annotations"] = a
		}
	}
	out["metadata"] = kept
	return out
}

// sameContent reports whether every merged object shows in a view as its
// live object does.
func sameContent(live, merged map[string]map[string]any) bool {
	for name, m := range merged {
		l, ok := live[name]
		if !ok || !reflect.DeepEqual(dkContent(l), dkContent(m)) {
			return false
		}
	}
	return true
}

// exitClass is how kubectl diff's exit status reads: 0 no difference, 1
// differences, 2 an error (any status above 1).
func exitClass(code int) int { return min(code, 2) }

// TestDiffAgreesWithKubectlDiff: kubectl implicit diff answers for kubectl
// apply. For each edit of the table, the real `kubectl diff` (with the same
// files and apply mode) is the oracle: the same exit status (0, 1, >1), and
// when the source changes, the object kubectl would store is what the views
// show after the edit, in the source's own namespace or, for a candidate, in
// its canaries. Deletions are judged against `kubectl delete --dry-run=server`.
//
//	implicit-global  dk-locked (locked)
//	dk-org           dk-viewers (label tier: org; label owner: platform, set by another manager), dk-excl
//	├── dk-team-a    stage canary
//	│   └── dk-sub
//	└── dk-team-b    excludes rolebindings/dk-excl
//	dk-other
func TestDiffAgreesWithKubectlDiff(t *testing.T) {
	kube, _ := admin(t)
	ensureNamespace(t, kube, globalNS)
	path := buildPlugin(t)
	adm := pluginUser{t: t, name: "admin", path: path, kubeconfig: cp.KubeconfigPath(), home: t.TempDir()}

	t.Log("the hierarchy")
	createNamespace(t, kube, "dk-org", nil, nil)
	createNamespace(t, kube, "dk-team-a", map[string]string{"implicit.dev/parent": "dk-org", "implicit.dev/stage": "canary"}, nil)
	createNamespace(t, kube, "dk-team-b", map[string]string{"implicit.dev/parent": "dk-org"}, map[string]string{"implicit.dev/exclude": "rolebindings/dk-excl"})
	createNamespace(t, kube, "dk-sub", map[string]string{"implicit.dev/parent": "dk-team-a"}, nil)
	createNamespace(t, kube, "dk-other", nil, nil)

	t.Log("the sources, applied with kubectl apply as a GitOps repository would; owner: platform by another field manager")
	apply := func(manifest string, args ...string) {
		t.Helper()
		r := adm.kubectlStdin(t.Context(), strings.NewReader(manifest), append([]string{"apply", "-f", "-"}, args...)...)
		if r.code != 0 {
			t.Fatalf("kubectl apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	viewers := dkRBAC("dk-org", "dk-viewers", "  labels:\n    tier: org\n", "view", "org:viewers")
	apply(viewers)
	apply(dkRBAC("dk-org", "dk-excl", "", "view", "org:excl"))
	apply(dkRBAC(globalNS, "dk-locked", "  annotations:\n    implicit.dev/locked: \"true\"\n", "view", "org:auditors"))
	t.Cleanup(func() {
		adm.kubectl(t.Context(), "delete", "rolebinding", "dk-locked", "-n", globalNS, "--ignore-not-found")
	})
	apply(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: dk-viewers
  namespace: dk-org
  labels:
    owner: platform
`, "--server-side", "--field-manager=platform")

	t.Log("a view item does not carry its source's kubectl.kubernetes.io/last-applied-configuration")
	_, dyn := admin(t)
	eventually(t, "dk-team-a's view of dk-viewers", func(ctx context.Context) error {
		it, err := dyn.Resource(viewRoleBindings).Namespace("dk-team-a").Get(ctx, "dk-viewers", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := it.GetAnnotations()["kubectl.kubernetes.io/last-applied-configuration"]; ok {
			return errorf("the view item carries last-applied-configuration: %v", it.GetAnnotations())
		}
		return nil
	})

	for _, tc := range []struct {
		name     string
		manifest string
		args     []string // the apply mode, for both diffs
		delete   bool     // judged against kubectl delete --dry-run=server
		// canary is where a candidate's content shows ("": the source's own namespace).
		canary string
		want   int // the exit class both agree on
		// subtree are the namespaces whose views a Namespace's edit may
		// change; revert is the kubectl command that undoes the edit once
		// it was applied to compare the preview with the views.
		subtree []string
		revert  []string
		// losers: a Namespace's deletion takes inherited items from
		// these, as the server's dry run warns and the diff must say.
		losers []string
	}{
		{name: "the file as applied changes nothing", manifest: viewers, want: 0},
		{name: "a partial file changing the subject keeps the labels", want: 1,
			manifest: dkRBAC("dk-org", "dk-viewers", "", "view", "org:readers")},
		{name: "a label the file adds", want: 1,
			manifest: dkRBAC("dk-org", "dk-viewers", "  labels:\n    tier: org\n    env: prod\n", "view", "org:viewers")},
		{name: "a label the last apply set and the file drops is removed", want: 1,
			manifest: dkRBAC("dk-org", "dk-viewers", "  labels:\n    env: prod\n", "view", "org:viewers")},
		{name: "roleRef is immutable", want: 2,
			manifest: dkRBAC("dk-org", "dk-viewers", "  labels:\n    tier: org\n", "edit", "org:viewers")},
		{name: "server-side apply of a partial file keeps the other manager's label", args: []string{"--server-side"}, want: 1,
			manifest: dkRBAC("dk-org", "dk-viewers", "", "view", "org:readers")},
		{name: "server-side apply of a label another manager owns conflicts", args: []string{"--server-side"}, want: 2,
			manifest: dkRBAC("dk-org", "dk-viewers", "  labels:\n    owner: team\n", "view", "org:viewers")},
		{name: "server-side apply with --force-conflicts takes it", args: []string{"--server-side", "--force-conflicts"}, want: 1,
			manifest: dkRBAC("dk-org", "dk-viewers", "  labels:\n    owner: team\n", "view", "org:viewers")},
		{name: "server-side apply of the same values changes only last-applied", args: []string{"--server-side"}, want: 0,
			manifest: dkRBAC("dk-org", "dk-viewers", "  labels:\n    tier: org\n", "view", "org:viewers")},
		{name: "a shadow of a locked inherited binding is refused by the guard", want: 2,
			manifest: dkRBAC("dk-team-b", "dk-locked", "", "edit", "team:b")},
		{name: "a new binding", want: 1,
			manifest: dkRBAC("dk-org", "dk-new", "", "view", "org:new")},
		{name: "a binding the child excludes", want: 1,
			manifest: dkRBAC("dk-org", "dk-excl", "", "view", "org:excl2")},
		{name: "a candidate, seen by its canary", canary: "dk-team-a", want: 1,
			manifest: dkRBAC("dk-org", "dk-viewers.next", "  annotations:\n    implicit.dev/candidate-for: dk-viewers\n    implicit.dev/canary-selector: implicit.dev/stage=canary\n", "view", "org:next")},
		{name: "a candidate may not change an immutable field", want: 2,
			manifest: dkRBAC("dk-org", "dk-viewers.next", "  annotations:\n    implicit.dev/candidate-for: dk-viewers\n    implicit.dev/canary-selector: implicit.dev/stage=canary\n", "edit", "org:viewers")},
		{name: "an invalid binding", want: 2,
			manifest: "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: dk-bad\n  namespace: dk-org\nroleRef:\n  kind: ClusterRole\n  name: \"\"\n"},
		{name: "a namespace's new parent", want: 1,
			manifest: dkNamespace("dk-sub", "    implicit.dev/parent: dk-other\n"),
			subtree:  []string{"dk-sub"}, revert: []string{"label", "namespace", "dk-sub", "implicit.dev/parent=dk-team-a", "--overwrite"}},
		{name: "a namespace's new exclusion", want: 1,
			manifest: "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: dk-team-a\n  annotations:\n    implicit.dev/exclude: rolebindings/dk-viewers\n",
			subtree:  []string{"dk-team-a", "dk-sub"}, revert: []string{"annotate", "namespace", "dk-team-a", "implicit.dev/exclude-"}},
		{name: "a namespace's parent that makes a cycle is refused", want: 2,
			manifest: dkNamespace("dk-org", "    implicit.dev/parent: dk-sub\n")},
		{name: "deleting a source", delete: true, want: 1,
			manifest: dkRBAC("dk-org", "dk-excl", "", "view", "org:excl")},
		{name: "deleting a parent namespace (no tenancy labels of its own)", delete: true, want: 1,
			manifest: "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: dk-org\n",
			losers:   []string{"dk-sub", "dk-team-a", "dk-team-b"}},
		{name: "deleting what does not exist", delete: true, want: 2,
			manifest: dkRBAC("dk-org", "dk-nosuch", "", "view", "org:nosuch")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var oracle int
			var live, merged map[string]map[string]any
			var said string
			if tc.delete {
				r := adm.kubectlStdin(t.Context(), strings.NewReader(tc.manifest), "delete", "--dry-run=server", "-f", "-")
				oracle, said = 1, r.stdout+r.stderr // a deletion changes the views of what exists
				if r.code != 0 {
					oracle = 2
				}
			} else {
				oracle, live, merged, said = kubectlDiff(t, adm, tc.manifest, append([]string{"-f", "-"}, tc.args...)...)
				oracle = exitClass(oracle)
				if oracle == 1 && sameContent(live, merged) {
					// kubectl diff shows every field; a view shows no
					// kubectl.kubernetes.io/last-applied-configuration,
					// which an apply rewrites (server-side too).
					t.Log("kubectl diff differs only in what views do not show: no view changes")
					oracle = 0
				}
			}
			t.Logf("kubectl %s: exit class %d\n%s", map[bool]string{true: "delete --dry-run=server", false: "diff"}[tc.delete], oracle, said)
			if oracle != tc.want {
				t.Fatalf("the oracle's exit class is %d, the table says %d: the table is wrong", oracle, tc.want)
			}
			args := append([]string{"implicit", "diff", "-f", "-"}, tc.args...)
			if tc.delete {
				args = append(args, "--delete")
			}
			table := adm.kubectlStdin(t.Context(), strings.NewReader(tc.manifest), args...)
			t.Logf("kubectl %s: exit %d\n%s%s", strings.Join(args, " "), table.code, table.stdout, table.stderr)
			if got := exitClass(table.code); got != oracle {
				t.Fatalf("kubectl implicit diff exits %d (class %d); kubectl says %d", table.code, got, oracle)
			}
			if oracle == 2 && !strings.Contains(table.stderr, "rror") {
				t.Errorf("a refused apply prints no error: %q", table.stderr)
			}
			if len(tc.losers) > 0 {
				warning := fmt.Sprintf("takes inherited items from %d namespaces: %s", len(tc.losers), strings.Join(tc.losers, ", "))
				if !strings.Contains(said, warning) {
					t.Errorf("kubectl delete --dry-run=server does not warn %q", warning)
				}
				if want := fmt.Sprintf("%d namespace(s) below it lose what it and its ancestors pass down: %s.", len(tc.losers), strings.Join(tc.losers, ", ")); !strings.Contains(table.stdout, want) {
					t.Errorf("kubectl implicit diff --delete does not say %q", want)
				}
			}
			if oracle == 1 && !tc.delete && strings.Contains(tc.manifest, "kind: Namespace") {
				dkNamespaceViews(t, adm, tc.manifest, tc.subtree, tc.revert)
				return
			}
			if oracle != 1 || tc.delete || len(merged) == 0 {
				return
			}
			t.Log("the object kubectl would store is what the views show after the edit")
			js := adm.kubectlStdin(t.Context(), strings.NewReader(tc.manifest), append(args, "-o", "json")...)
			var p v1alpha1.Preview
			if err := json.Unmarshal([]byte(js.stdout), &p); err != nil {
				t.Fatalf("diff -o json: %v\n%s%s", err, js.stdout, js.stderr)
			}
			where := tc.canary
			if where == "" {
				where = p.Namespace
			}
			for name, obj := range merged {
				want := dkContent(obj)
				found := false
				for _, c := range p.Status.Changed {
					if c.Namespace != where || c.After == nil || c.After.Content == nil {
						continue
					}
					var got map[string]any
					if err := json.Unmarshal(c.After.Content.Raw, &got); err != nil {
						t.Fatal(err)
					}
					found = true
					if !reflect.DeepEqual(got, want) {
						g, _ := yaml.Marshal(got)
						w, _ := yaml.Marshal(want)
						t.Errorf("%s in %s after the edit:\n%s\nkubectl diff's merged %s:\n%s", p.Spec.Resource, where, g, name, w)
					}
				}
				if !found {
					t.Errorf("the preview shows no change in %s: %+v", where, p.Status)
				}
			}
		})
	}

	t.Run("one reach", func(t *testing.T) {
		adm := adm
		adm.t = t
		t.Log("dk-org/dk-excl: dk-team-a and dk-sub inherit it; dk-team-b excludes it; dk-org is its own. The fan-out warning, reach, diff and rollout status count 2")
		edit := dkRBAC("dk-org", "dk-excl", "", "view", "org:excl-reach")
		warn := adm.kubectlStdin(t.Context(), strings.NewReader(edit), "apply", "--dry-run=server", "-f", "-")
		if !strings.Contains(warn.stderr, "this change reaches 2 namespaces") {
			t.Errorf("the fan-out warning: %q", warn.stderr)
		}
		adm.expect(0, func(r pluginRun) error {
			if !strings.Contains(r.stdout, "reaches 2 namespace(s)") {
				return errorf("reach does not count 2")
			}
			return nil
		}, "reach", "rb", "dk-excl", "-n", "dk-org")
		d := adm.kubectlStdin(t.Context(), strings.NewReader(edit), "implicit", "diff", "-f", "-")
		if !strings.Contains(d.stdout, "reaches 2 namespace(s) besides its own") {
			t.Errorf("diff does not count 2:\n%s%s", d.stdout, d.stderr)
		}
		adm.expect(0, func(r pluginRun) error {
			if !strings.Contains(r.stdout, "0 namespace(s) see the candidate, 2 the stable version.") || strings.Contains(r.stdout, "dk-org ") {
				return errorf("rollout status does not count 2, or counts dk-org")
			}
			return nil
		}, "rollout", "status", "rb", "dk-excl", "-n", "dk-org")
	})

	t.Run("a parent admin follows its own sources", func(t *testing.T) {
		t.Log("admin of dk-org (and, inherited, of its subtree), not of the cluster: reach and rollout status answer within dk-org's subtree")
		createRoleBinding(t, kube, "dk-org", "dk-org-admins", "admin", "dk-org-admins")
		config, err := cp.WriteUserKubeconfig("dk-org-admin", "dk-org-admins")
		if err != nil {
			t.Fatal(err)
		}
		parent := pluginUser{t: t, name: "parent admin", path: path, kubeconfig: config, home: t.TempDir()}
		parent.expect(0, func(r pluginRun) error {
			if !strings.Contains(r.stdout, "reaches 2 namespace(s).") || !strings.Contains(r.stdout, "read within dk-org's subtree") {
				return errorf("not answered within the subtree:\n%s", r.stderr)
			}
			return nil
		}, "reach", "rb", "dk-excl", "-n", "dk-org")
		parent.expect(0, func(r pluginRun) error {
			if !strings.Contains(r.stdout, "0 namespace(s) see the candidate, 2 the stable version.") {
				return errorf("rollout status:\n%s", r.stderr)
			}
			return nil
		}, "rollout", "status", "rb", "dk-excl", "-n", "dk-org")
		t.Log("a source of the global namespace is an org admin's question: the error says which permission would do")
		parent.expect(1, func(r pluginRun) error {
			if !strings.Contains(r.stderr, "an org admin's question, which needs list on rolebindings.implicit.dev at the cluster scope") {
				return errorf("the error does not say which permission would do:\n%s", r.stderr)
			}
			return nil
		}, "reach", "rb", "dk-locked", "-n", globalNS)
	})

	t.Run("rollout status waits until the rollout completes", func(t *testing.T) {
		adm := adm
		adm.t = t
		candidate := func(selector string) string {
			return dkRBAC("dk-org", "dk-viewers.wait", "  annotations:\n    implicit.dev/candidate-for: dk-viewers\n    implicit.dev/canary-selector: "+selector+"\n", "view", "org:wait")
		}
		t.Cleanup(func() {
			adm.kubectl(t.Context(), "delete", "rolebinding", "dk-viewers.wait", "-n", "dk-org", "--ignore-not-found")
		})
		t.Log("an audit-only candidate: status prints its audit and says it never completes by itself")
		apply(candidate("implicit.dev/stage=nobody"))
		adm.expect(0, func(r pluginRun) error {
			if !strings.Contains(r.stdout, "is audit-only (its selector matches no namespace): it never completes by itself") || !strings.Contains(r.stdout, "AUDIT") {
				return errorf("no audit-only answer")
			}
			return nil
		}, "rollout", "status", "rb", "dk-viewers", "-n", "dk-org")

		t.Log("a candidate for the canaries: --watch=false returns; --timeout ends the wait with an error")
		apply(candidate("implicit.dev/stage=canary"))
		adm.expect(0, func(r pluginRun) error {
			if !strings.Contains(r.stdout, "1 namespace(s) see the candidate") || strings.Contains(r.stdout, "complete") {
				return errorf("not the open rollout")
			}
			return nil
		}, "rollout", "status", "rb", "dk-viewers", "-n", "dk-org", "--watch=false")
		r := adm.run(t.Context(), "rollout", "status", "rb", "dk-viewers", "-n", "dk-org", "--timeout=3s")
		if r.code != 1 || !strings.Contains(r.stderr, "timed out waiting for the rollout of dk-org/dk-viewers") {
			t.Errorf("--timeout: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}

		t.Log("by default it waits: the abort completes the rollout")
		waiting := exec.CommandContext(t.Context(), "kubectl", "implicit", "rollout", "status", "rb", "dk-viewers", "-n", "dk-org", "--timeout=2m")
		waiting.Env = append(os.Environ(), "PATH="+adm.path, "KUBECONFIG="+adm.kubeconfig, "HOME="+adm.home)
		stdout, err := waiting.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var errOut bytes.Buffer
		waiting.Stderr = &errOut
		if err := waiting.Start(); err != nil {
			t.Fatal(err)
		}
		t.Log("once it says it waits, abort")
		var said strings.Builder
		lines := bufio.NewScanner(stdout)
		for lines.Scan() && !strings.HasPrefix(lines.Text(), "Waiting for the candidate") {
			said.WriteString(lines.Text() + "\n")
		}
		said.WriteString(lines.Text() + "\n")
		if a := adm.run(t.Context(), "rollout", "abort", "rb", "dk-viewers", "-n", "dk-org"); a.code != 0 {
			t.Fatalf("rollout abort: exit %d\n%s%s", a.code, a.stdout, a.stderr)
		}
		for lines.Scan() {
			said.WriteString(lines.Text() + "\n")
		}
		// Stderr is read once Wait has copied all of it.
		r = pluginRun{stdout: said.String()}
		var exit *exec.ExitError
		if err := waiting.Wait(); errors.As(err, &exit) {
			r.code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		r.stderr = errOut.String()
		t.Logf("rollout status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		if r.code != 0 || !strings.Contains(r.stdout, "Waiting for the candidate to be promoted or aborted") ||
			!strings.Contains(r.stdout, "rollout of rolebindings.rbac.authorization.k8s.io dk-org/dk-viewers complete: every namespace sees one version.") {
			t.Errorf("rollout status did not wait for the abort and say the rollout completed")
		}
	})
}

// dkViewFields is what a view item and a preview's item summary both show:
// every field but apiVersion, kind and metadata, and the source's namespace.
func dkViewFields(obj map[string]any, sourceNamespace string) map[string]any {
	out := map[string]any{"sourceNamespace": sourceNamespace}
	for k, v := range obj {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			out[k] = v
		}
	}
	return out
}

// dkViews lists the views of resource in each namespace: namespace/name ->
// dkViewFields.
func dkViews(t *testing.T, resource string, namespaces []string) map[string]map[string]any {
	t.Helper()
	_, dyn := admin(t)
	out := map[string]map[string]any{}
	for _, ns := range namespaces {
		l, err := dyn.Resource(v1alpha1.SchemeGroupVersion.WithResource(resource)).Namespace(ns).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range l.Items {
			out[ns+"/"+it.GetName()] = dkViewFields(it.Object, it.GetLabels()["implicit.dev/source-namespace"])
		}
	}
	return out
}

// dkNamespaceViews: the preview of a Namespace's edit (diff -o json) is what
// the views show once the edit is applied for real, item by item in each
// namespace of its subtree, every view served; then revert undoes it and
// the views are back.
func dkNamespaceViews(t *testing.T, adm pluginUser, manifest string, subtree, revert []string) {
	t.Helper()
	js := adm.kubectlStdin(t.Context(), strings.NewReader(manifest), "implicit", "diff", "-f", "-", "-o", "json")
	var list struct{ Items []v1alpha1.Preview }
	var previews []v1alpha1.Preview
	if err := json.Unmarshal([]byte(js.stdout), &list); err == nil && len(list.Items) > 0 {
		previews = list.Items
	} else {
		var p v1alpha1.Preview
		if err := json.Unmarshal([]byte(js.stdout), &p); err != nil {
			t.Fatalf("diff -o json: %v\n%s%s", err, js.stdout, js.stderr)
		}
		previews = []v1alpha1.Preview{p}
	}
	if len(previews) == 0 {
		t.Fatalf("diff -o json shows no preview of the namespace's change:\n%s%s", js.stdout, js.stderr)
	}
	before := map[string]map[string]map[string]any{}
	want := map[string]map[string]map[string]any{}
	changes := 0
	for _, p := range previews {
		r := p.Spec.Resource
		before[r] = dkViews(t, r, subtree)
		want[r] = map[string]map[string]any{}
		for k, v := range before[r] {
			want[r][k] = v
		}
		for _, c := range p.Status.Changed {
			changes++
			key := c.Namespace + "/" + c.Name
			if !slices.Contains(subtree, c.Namespace) {
				t.Errorf("%s: a change outside the subtree %v: %s", r, subtree, key)
			}
			if c.After == nil {
				delete(want[r], key)
				continue
			}
			var content map[string]any
			if err := json.Unmarshal(c.After.Content.Raw, &content); err != nil {
				t.Fatal(err)
			}
			want[r][key] = dkViewFields(content, c.After.Source.Namespace)
		}
		t.Logf("%s: the preview says %d change(s) in %v", r, len(p.Status.Changed), subtree)
	}
	if changes == 0 {
		t.Errorf("the namespace's change previews no view change:\n%s", js.stdout)
	}
	t.Log("applied for real, the views are what the preview said")
	if r := adm.kubectlStdin(t.Context(), strings.NewReader(manifest), "apply", "-f", "-"); r.code != 0 {
		t.Fatalf("kubectl apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	undo := func() {
		if r := adm.kubectl(context.Background(), revert...); r.code != 0 {
			t.Fatalf("kubectl %s: exit %d\n%s%s", strings.Join(revert, " "), r.code, r.stdout, r.stderr)
		}
		for r, b := range before {
			eventually(t, "the views back after the revert", func(context.Context) error {
				if got := dkViews(t, r, subtree); !reflect.DeepEqual(got, b) {
					return errorf("%s: %v, want %v", r, got, b)
				}
				return nil
			})
		}
	}
	defer undo()
	for r, w := range want {
		eventually(t, r+" views as previewed", func(context.Context) error {
			if got := dkViews(t, r, subtree); !reflect.DeepEqual(got, w) {
				g, _ := yaml.Marshal(got)
				ww, _ := yaml.Marshal(w)
				return errorf("%s views after the edit:\n%s\nthe preview said:\n%s", r, g, ww)
			}
			return nil
		})
	}
}
