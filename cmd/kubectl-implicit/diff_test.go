package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// answerPreview answers a preview as the server would for a binding whose
// live version has the subject "org:viewers" in team-a and team-b: an
// object with the same subjects changes nothing; another modifies both
// namespaces' item the same way.
func answerPreview(w http.ResponseWriter, r *http.Request) {
	var p v1alpha1.Preview
	b, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(b, &p)
	p.Namespace = strings.Split(r.URL.Path, "/")[5]
	var obj unstructured.Unstructured
	_ = json.Unmarshal(p.Spec.Object.Raw, &obj.Object)
	p.Status = v1alpha1.PreviewStatus{Operation: v1alpha1.OperationUpdate, Name: obj.GetName(), Reached: 2}
	live := map[string]any{"metadata": map[string]any{}, "roleRef": map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
		"subjects": []any{map[string]any{"kind": "Group", "name": "org:viewers"}}}
	proposed := map[string]any{"metadata": map[string]any{}, "roleRef": obj.Object["roleRef"], "subjects": obj.Object["subjects"]}
	beforeRaw, _ := json.Marshal(live)
	afterRaw, _ := json.Marshal(proposed)
	if string(beforeRaw) != string(afterRaw) {
		for _, ns := range []string{"team-b", "team-a"} {
			ref := v1alpha1.ItemReference{Namespace: p.Namespace, Name: obj.GetName(), Scope: "parent"}
			p.Status.Changed = append(p.Status.Changed, v1alpha1.NamespaceChange{Namespace: ns, Type: v1alpha1.ChangeModified,
				Before: &v1alpha1.ItemSummary{Source: ref, Content: &runtime.RawExtension{Raw: beforeRaw}},
				After:  &v1alpha1.ItemSummary{Source: ref, Content: &runtime.RawExtension{Raw: afterRaw}}})
		}
	}
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(p)
}

const bindingYAML = `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: %s
  namespace: org
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: view
subjects:
- kind: Group
  name: org:viewers
`

// TestDiff: diff reads its objects as kubectl apply does (files,
// directories with -R, kustomizations with -k), exits 0 when nothing
// would change, 1 with a field diff of each changed item (one for the
// namespaces that change alike), and >1 on an error.
func TestDiff(t *testing.T) {
	t.Parallel()
	srv := fakeServer(t)
	flags := serverFlags(t, srv)
	dir := t.TempDir()
	write := func(path, content string) string {
		t.Helper()
		path = filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	same := write("same/a.yaml", strings.ReplaceAll(bindingYAML, "%s", "org-viewers"))
	write("tree/sub/b.yaml", strings.ReplaceAll(bindingYAML, "%s", "org-viewers"))
	changed := write("changed/c.yaml", strings.ReplaceAll(bindingYAML, "%s", "org-viewers")+"- kind: Group\n  name: org:auditors\n")
	write("changed/kustomization.yaml", "resources:\n- c.yaml\n")

	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		want     []string
		wantNot  []string
		wantErrs string
	}{
		{name: "a file that changes nothing", args: []string{"-f", same}, code: exitOK,
			want: []string{"rolebindings org/org-viewers (Update): reaches 2 namespace(s) besides its own, changes 0, kept unchanged 0."}, wantNot: []string{"diff -u"}},
		{name: "a directory, recursively", args: []string{"-f", filepath.Join(dir, "tree"), "-R"}, code: exitOK,
			want: []string{"org/org-viewers (Update)"}},
		{name: "a directory without -R reads only its own files", args: []string{"-f", filepath.Join(dir, "tree")}, code: exitDiffError,
			wantErrs: "recognized file extensions are [.json .yaml .yml]"},
		{name: "a change, with a field diff", args: []string{"-f", changed}, code: exitChanged, want: []string{
			"team-a      Modified",
			"\ndiff -u rolebindings.implicit.dev/org-viewers in team-a, team-b\n--- rolebindings.implicit.dev/org-viewers (before)\n+++ rolebindings.implicit.dev/org-viewers (after)\n",
			"   name: org:viewers\n+- kind: Group\n+  name: org:auditors\n",
		}},
		{name: "a kustomization", args: []string{"-k", filepath.Join(dir, "changed")}, code: exitChanged, want: []string{"+  name: org:auditors"}},
		{name: "a missing file", args: []string{"-f", filepath.Join(dir, "nothing.yaml")}, code: exitDiffError, wantErrs: "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runPlugin(t, append(append([]string{"diff"}, tc.args...), flags...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
			if !strings.Contains(errOut, tc.wantErrs) {
				t.Errorf("standard error %q lacks %q", errOut, tc.wantErrs)
			}
			if strings.Count(out, "diff -u") > 1 {
				t.Errorf("namespaces that change alike print one diff:\n%s", out)
			}
		})
	}
}
