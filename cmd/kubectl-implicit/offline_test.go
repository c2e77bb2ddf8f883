package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const examples = "../../artifacts/offline-examples"

// TestOfflineExamples: the shipped examples pass, as docs/offline.md says.
func TestOfflineExamples(t *testing.T) {
	t.Parallel()
	code, out, errOut := runPlugin(t, "test", examples)
	if code != 0 {
		t.Fatalf("test %s: exit %d\n%s%s", examples, code, out, errOut)
	}
	if !strings.Contains(out, "0 failed") || strings.Contains(out, "Fail") {
		t.Errorf("output:\n%s", out)
	}
}

// copyDir copies the examples' manifests into a directory of the test's.
func copyDir(t *testing.T, from string) string {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestOfflineTestFailures: a wrong expectation fails with the difference
// (exit 1), in each output form; bad input exits 2 naming the problem.
func TestOfflineTestFailures(t *testing.T) {
	t.Parallel()
	dir := copyDir(t, examples)
	write(t, filepath.Join(dir, "tests", "wrong.yaml"), `apiVersion: test.implicit.dev/v1alpha1
kind: ImplicitTest
metadata: {name: wrong}
views:
- namespace: team-b
  resource: rolebindings
  contains: [{name: org-viewers}]
edits:
- name: shadowing the locked binding
  object: {apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: org-auditors, namespace: team-b}, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}
  refused: false
`)
	code, out, _ := runPlugin(t, "test", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{"wrong", "not in the view", "got refused by /admission/shadows", "2 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = runPlugin(t, "test", dir, "-o", "json")
	var report struct {
		Passed, Failed int
	}
	if err := json.Unmarshal([]byte(out), &report); code != 1 || err != nil || report.Failed != 2 || report.Passed == 0 {
		t.Errorf("-o json: exit %d, %v, %+v\n%s", code, err, report, out)
	}
	code, out, _ = runPlugin(t, "test", dir, "-o", "junit")
	var suites junitSuites
	if err := xml.Unmarshal([]byte(out), &suites); code != 1 || err != nil {
		t.Fatalf("-o junit: exit %d, %v\n%s", code, err, out)
	}
	failures := 0
	for _, s := range suites.Suites {
		failures += s.Failures
	}
	if failures != 2 {
		t.Errorf("-o junit: %d failures, want 2\n%s", failures, out)
	}

	bad := t.TempDir()
	write(t, filepath.Join(bad, "t.yaml"), "apiVersion: test.implicit.dev/v1alpha1\nkind: ImplicitTest\nmetadata: {name: x}\nveiws: []\n")
	if code, _, errOut := runPlugin(t, "test", bad); code != 2 || !strings.Contains(errOut, `unknown field "veiws"`) {
		t.Errorf("a misspelt field: exit %d, %s", code, errOut)
	}
	write(t, filepath.Join(bad, "t.yaml"), "kind: Namespace\nmetadata: {name: x}\n")
	if code, _, errOut := runPlugin(t, "test", bad); code != 2 || !strings.Contains(errOut, "t.yaml#0") {
		t.Errorf("a document without apiVersion: exit %d, %s", code, errOut)
	}
}

// TestOfflineSymlinks: a link that leaves the directory is refused.
func TestOfflineSymlinks(t *testing.T) {
	t.Parallel()
	dir := copyDir(t, examples)
	outside := filepath.Join(t.TempDir(), "secret.yaml")
	write(t, outside, "apiVersion: v1\nkind: Namespace\nmetadata: {name: outside}\n")
	if err := os.Symlink(outside, filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runPlugin(t, "test", dir)
	if code != 2 || !strings.Contains(errOut, "outside") || !strings.Contains(errOut, "refused") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// TestOfflineDiffGit: --from a Git ref reads the committed tree, not the
// work tree; the diff shows the changed view items, refuses a shadow of a
// locked item, keeps ConfigMap-like values out without --show-data; a ref
// the repository lacks is a clear error.
func TestOfflineDiffGit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	repo := t.TempDir()
	policies := filepath.Join(repo, "policies")
	if err := os.Rename(copyDir(t, examples), policies); err != nil {
		t.Fatal(err)
	}
	gitRun(t, repo, "init", "-q", "-b", "main")
	gitRun(t, repo, "add", "-A")
	gitRun(t, repo, "commit", "-q", "-m", "base")
	write(t, filepath.Join(policies, "pr.yaml"), `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: org-auditors, namespace: team-b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web, namespace: org}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress: [{ports: [{port: 8443}]}]
`)
	code, out, errOut := runPlugin(t, "diff", "--from", "main", "--to", policies, "-o", "markdown")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (changes)\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"**1 refused by the guards**", "/admission/shadows", "would shadow the locked global source implicit-global/org-auditors",
		"| `team-a` | added | `networkpolicies/web` | parent from org |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}

	// A change of a field: its path, its values only with --show-data.
	b, _ := os.ReadFile(filepath.Join(policies, "pr.yaml"))
	gitRun(t, repo, "add", "-A")
	gitRun(t, repo, "commit", "-q", "-m", "pr")
	write(t, filepath.Join(policies, "pr.yaml"), strings.Replace(string(b), "8443", "9443", 1))
	_, out, _ = runPlugin(t, "diff", "--from", "main", "--to", policies)
	if !strings.Contains(out, "spec.ingress") || strings.Contains(out, "9443") {
		t.Errorf("without --show-data:\n%s", out)
	}
	_, out, _ = runPlugin(t, "diff", "--from", "main", "--to", policies, "--show-data")
	if !strings.Contains(out, "9443") {
		t.Errorf("with --show-data:\n%s", out)
	}
	// The same tree on both sides: nothing changes, exit 0.
	gitRun(t, repo, "commit", "-q", "-a", "-m", "port")
	if code, out, errOut := runPlugin(t, "diff", "--from", "HEAD:policies", "--to", policies); code != 0 || !strings.Contains(out, "No changes") {
		t.Errorf("same tree: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = runPlugin(t, "diff", "--from", "origin/main", "--to", policies)
	if code != 2 || !strings.Contains(errOut, `git ref "origin/main" is not in the repository`) {
		t.Errorf("missing ref: exit %d: %s", code, errOut)
	}
}

// TestOfflineNow: --now is the reference time of the exceptions' ends:
// before the end the item is excepted, after it the server's mark brings it
// back; the time is stated; a malformed one is bad input.
func TestOfflineNow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "files.yaml"), `apiVersion: v1
kind: Namespace
metadata:
  name: team
  annotations:
    implicit.dev/exceptions: '[{"name":"tmp","exclude":["rolebindings/shared"],"reason":"INC-1","requestedBy":"olivia","expiresAt":"2026-03-01T00:00:00Z"}]'
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: shared, namespace: implicit-global}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
---
apiVersion: test.implicit.dev/v1alpha1
kind: ImplicitTest
metadata: {name: excepted}
views:
- {namespace: team, resource: rolebindings, absent: [shared]}
`)
	code, out, errOut := runPlugin(t, "test", dir, "--now", "2026-02-28T23:59:59Z")
	if code != 0 || !strings.Contains(out, "as of 2026-02-28T23:59:59Z") {
		t.Errorf("before the end: exit %d, want 0 and the time stated\n%s%s", code, out, errOut)
	}
	code, out, errOut = runPlugin(t, "test", dir, "--now", "2026-03-01T00:00:00Z")
	if code != 1 || !strings.Contains(out, "1 failed") {
		t.Errorf("at the end: exit %d, want 1 (shared is back)\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runPlugin(t, "test", dir, "--now", "yesterday"); code != 2 || !strings.Contains(errOut, "RFC3339") {
		t.Errorf("--now yesterday: exit %d, want 2\n%s", code, errOut)
	}
}
