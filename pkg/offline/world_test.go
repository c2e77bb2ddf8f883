package offline_test

import (
	"context"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/implicit-dev/implicit-apiserver/pkg/offline"
)

func load(t *testing.T, dir string) *offline.World {
	t.Helper()
	files, err := offline.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := offline.Decode(files)
	if err != nil {
		t.Fatal(err)
	}
	w, err := offline.Build(objs, offline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func object(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func TestViews(t *testing.T) {
	t.Parallel()
	w := load(t, "testdata/basic")
	tests := []struct {
		name, namespace string
		want            []string // name/scope/source-namespace
	}{
		{name: "child of org", namespace: "team-a", want: []string{"org-auditors/global/implicit-global", "org-viewers/parent/org"}},
		{name: "exclusion", namespace: "team-b", want: []string{"org-auditors/global/implicit-global"}},
		{name: "parent", namespace: "org", want: []string{"org-auditors/global/implicit-global", "org-viewers/local/org"}},
		{name: "global namespace is no tenant", namespace: "implicit-global", want: []string{"org-auditors/local/implicit-global"}},
		{name: "missing namespace", namespace: "nowhere", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items, err := w.View(tt.namespace, "rolebindings")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range items {
				got = append(got, it.Name+"/"+string(it.Scope)+"/"+it.SourceNamespace)
				if it.Object.GetNamespace() != tt.namespace || it.Object.GetLabels()["implicit.dev/scope"] != string(it.Scope) {
					t.Errorf("%s: view object %s/%s, labels %v", it.Name, it.Object.GetNamespace(), it.Object.GetName(), it.Object.GetLabels())
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("view = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	t.Parallel()
	w := load(t, "testdata/basic")
	tests := []struct {
		name      string
		op        offline.Operation
		object    string
		requester offline.Requester
		refused   string // substring of the reason; "" when allowed
		warning   string // substring of a warning
	}{
		{
			name: "shadow of a locked item",
			object: `{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: org-auditors, namespace: team-a},
				roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}, subjects: []}`,
			refused: "locked",
		},
		{
			name: "shadow of an unlocked item",
			object: `{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: org-viewers, namespace: team-a},
				roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}, subjects: []}`,
		},
		{
			name:    "cycle",
			object:  `{apiVersion: v1, kind: Namespace, metadata: {name: org, labels: {implicit.dev/parent: team-a}}}`,
			refused: "cycle",
		},
		{
			name:    "missing parent",
			object:  `{apiVersion: v1, kind: Namespace, metadata: {name: team-c, labels: {implicit.dev/parent: nowhere}}}`,
			refused: "does not exist",
		},
		{
			name:   "new child",
			object: `{apiVersion: v1, kind: Namespace, metadata: {name: team-c, labels: {implicit.dev/parent: org}}}`,
		},
		{
			name: "exclusion of a locked item",
			// Allowed, and warned of: the lock keeps the item in the view.
			object:  `{apiVersion: v1, kind: Namespace, metadata: {name: team-a, labels: {implicit.dev/parent: org}, annotations: {implicit.dev/exclude: rolebindings/org-auditors}}}`,
			warning: "a locked item can't be excluded",
		},
		{
			name:      "unlock without permission",
			op:        offline.Delete,
			object:    `{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: org-auditors, namespace: implicit-global}}`,
			requester: offline.Requester{User: "mallory"},
			refused:   "unlock",
		},
		{
			// kube-apiserver refuses it before any guard is asked
			// (TestOfflineMatchesServer, seed 1795965712222487298: a
			// binding deleted and made again in the files is an UPDATE).
			name: "a RoleBinding's roleRef changed",
			object: `{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: org-viewers, namespace: org},
				roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}, subjects: []}`,
			refused: "roleRef is immutable",
		},
		{
			name: "a RoleBinding's subjects changed",
			object: `{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: org-viewers, namespace: org},
				roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}, subjects: []}`,
		},
		{
			name:      "adopting a parent without update on it",
			object:    `{apiVersion: v1, kind: Namespace, metadata: {name: team-c, labels: {implicit.dev/parent: org}}}`,
			requester: offline.Requester{User: "mallory"},
			refused:   "update namespace",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := w.Judge(context.Background(), offline.Edit{Operation: tt.op, Object: object(t, tt.object), Requester: tt.requester})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.refused == "" && !v.Allowed:
				t.Errorf("refused by %s: %s; want allowed", v.Guard, v.Reason)
			case tt.refused != "" && v.Allowed:
				t.Errorf("allowed; want refused for %q", tt.refused)
			case tt.refused != "" && !strings.Contains(v.Reason, tt.refused):
				t.Errorf("refused by %s: %q; want a reason with %q", v.Guard, v.Reason, tt.refused)
			}
			if tt.warning != "" && !strings.Contains(strings.Join(v.Warnings, "\n"), tt.warning) {
				t.Errorf("warnings %q; want one with %q", v.Warnings, tt.warning)
			}
		})
	}
}

func TestMay(t *testing.T) {
	t.Parallel()
	w := load(t, "testdata/basic")
	get := func(ns string) authorizationv1.ResourceAttributes {
		return authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "pods"}
	}
	tests := []struct {
		name      string
		requester offline.Requester
		attrs     authorizationv1.ResourceAttributes
		want      bool
	}{
		{name: "inherited from the parent", requester: offline.Requester{User: "u", Groups: []string{"org-viewers"}}, attrs: get("team-a"), want: true},
		{name: "excluded", requester: offline.Requester{User: "u", Groups: []string{"org-viewers"}}, attrs: get("team-b"), want: false},
		{name: "global", requester: offline.Requester{User: "u", Groups: []string{"auditors"}}, attrs: get("team-b"), want: true},
		{name: "verb not in the role", requester: offline.Requester{User: "u", Groups: []string{"auditors"}}, attrs: authorizationv1.ResourceAttributes{Namespace: "team-b", Verb: "delete", Resource: "pods"}, want: false},
		{name: "nobody", requester: offline.Requester{User: "u"}, attrs: get("team-a"), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := w.May(tt.requester, tt.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if got.Allowed != tt.want {
				t.Errorf("May = %+v, want allowed %v", got, tt.want)
			}
		})
	}
}
