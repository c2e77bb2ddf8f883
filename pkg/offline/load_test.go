package offline_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/offline"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func build(t *testing.T, dir string) (*offline.World, error) {
	t.Helper()
	files, err := offline.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	objs, err := offline.Decode(files)
	if err != nil {
		return nil, err
	}
	return offline.Build(objs, offline.Options{})
}

func TestLoad(t *testing.T) {
	t.Parallel()
	const rb = `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: %s, namespace: implicit-global}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
`
	tests := []struct {
		name    string
		files   map[string]string
		want    []string // team's rolebindings
		wantErr string
	}{
		{
			name: "multi-document files, Lists, JSON, nested directories",
			files: map[string]string{
				"ns.yaml":        "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n---\n# a comment only\n---\n",
				"a/b/list.yaml":  "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.ReplaceAll(rb, "%s", "one"), "\n", "\n  "),
				"two.json":       `{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "two", "namespace": "implicit-global"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}}`,
				"README.md":      "not a manifest",
				".hidden/x.yaml": strings.ReplaceAll(rb, "%s", "hidden"),
			},
			want: []string{"one", "two"},
		},
		{
			name: "kustomizations and charts are not built",
			files: map[string]string{
				"ns.yaml":            "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n",
				"kustomization.yaml": "resources: [https://example.com/remote]\n",
				"chart/Chart.yaml":   "name: x\n",
			},
		},
		{
			name:    "a document without apiVersion",
			files:   map[string]string{"bad.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\nkind: Namespace\nmetadata: {name: b}\n"},
			wantErr: "bad.yaml#1",
		},
		{
			name:    "an object defined twice",
			files:   map[string]string{"a.yaml": strings.ReplaceAll(rb, "%s", "x"), "b.yaml": strings.ReplaceAll(rb, "%s", "x")},
			wantErr: "defined twice",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, err := build(t, writeFiles(t, tt.files))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			items, err := w.View("team", "rolebindings")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range items {
				got = append(got, it.Name)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("team's rolebindings %v, want %v", got, tt.want)
			}
		})
	}
}

// TestConfiguredKind: a CRD kind an ImplicitConfiguration lists is served
// from unstructured objects, named by its CustomResourceDefinition, with
// its own global namespace (never a tenant).
func TestConfiguredKind(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"config.yaml": `apiVersion: config.implicit.dev/v1alpha1
kind: ImplicitConfiguration
resources:
- {group: rbac.authorization.k8s.io, version: v1, resource: rolebindings}
- {group: policy.example.com, version: v1, resource: guardrails, globalNamespace: guardrails-global}
`,
		"crd.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: guardrails.policy.example.com}
spec:
  group: policy.example.com
  scope: Namespaced
  names: {plural: guardrails, singular: guardrail, kind: Guardrail}
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]
`,
		"objs.yaml": `apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: policy.example.com/v1
kind: Guardrail
metadata: {name: max-replicas, namespace: guardrails-global}
spec: {max: 10}
---
apiVersion: policy.example.com/v1
kind: Guardrail
metadata: {name: ignored, namespace: implicit-global}
spec: {max: 1}
`,
	})
	w, err := build(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	items, err := w.View("team", "guardrails")
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || items[0].Name != "max-replicas" || items[0].Scope != "global" || items[0].Object.GetKind() != "Guardrail" {
		t.Fatalf("team's guardrails: %+v", items)
	}
	if max, _, _ := unstructuredInt(items[0].Object.Object, "spec", "max"); max != 10 {
		t.Errorf("spec.max = %d, want 10 (an integer, as the API server decodes it)", max)
	}
	if _, err := w.View("team", "networkpolicies"); err == nil {
		t.Errorf("networkpolicies is not configured: want an error")
	}
	if items, _ := w.View("guardrails-global", "guardrails"); len(items) != 1 || items[0].Scope != "local" {
		t.Errorf("the kind's global namespace is no tenant: %+v", items)
	}
}

func unstructuredInt(obj map[string]any, fields ...string) (int64, bool, error) {
	cur := any(obj)
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false, nil
		}
		cur = m[f]
	}
	v, ok := cur.(int64)
	return v, ok, nil
}

// TestDiffOrder: a pull request adding a parent and its child is judged
// parents first, each edit against the world the earlier ones left: both
// are admitted; a refused edit is not applied to later judgements.
func TestDiffOrder(t *testing.T) {
	t.Parallel()
	base := writeFiles(t, map[string]string{"ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: org}\n"})
	head := writeFiles(t, map[string]string{"ns.yaml": `apiVersion: v1
kind: Namespace
metadata: {name: org}
---
apiVersion: v1
kind: Namespace
metadata: {name: team, labels: {implicit.dev/parent: dept}}
---
apiVersion: v1
kind: Namespace
metadata: {name: dept, labels: {implicit.dev/parent: org}}
---
apiVersion: v1
kind: Namespace
metadata: {name: lost, labels: {implicit.dev/parent: nowhere}}
`})
	read := func(dir string) []offline.Object {
		files, err := offline.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := offline.Decode(files)
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
	rep, err := offline.Diff(context.Background(), read(base), read(head), offline.Options{}, offline.DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range rep.Edits {
		got = append(got, string(e.Operation)+" "+e.Object+" "+map[bool]string{true: "allowed", false: "refused"}[e.Verdict.Allowed])
	}
	want := []string{"CREATE Namespace/dept allowed", "CREATE Namespace/lost refused", "CREATE Namespace/team allowed"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("edits\n got %v\nwant %v", got, want)
	}
	if !rep.Refused() {
		t.Error("Refused() = false")
	}
}

// TestMayRealRBAC: the files' own RoleBindings grant as kube-apiserver's
// RBAC does, resourceNames included.
func TestMayRealRBAC(t *testing.T) {
	t.Parallel()
	w, err := build(t, writeFiles(t, map[string]string{"a.yaml": `apiVersion: v1
kind: Namespace
metadata: {name: team}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: one-config, namespace: team}
rules: [{apiGroups: [""], resources: [configmaps], resourceNames: [settings], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bob-one-config, namespace: team}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: one-config}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}]
`}))
	if err != nil {
		t.Fatal(err)
	}
	bob := offline.Requester{User: "bob"}
	for _, tt := range []struct {
		name string
		want bool
	}{{"settings", true}, {"other", false}, {"", false}} {
		got, err := w.May(bob, authorizationv1.ResourceAttributes{Namespace: "team", Verb: "get", Resource: "configmaps", Name: tt.name})
		if err != nil {
			t.Fatal(err)
		}
		if got.Allowed != tt.want {
			t.Errorf("bob get configmaps %q: %+v, want %v", tt.name, got, tt.want)
		}
	}
}
