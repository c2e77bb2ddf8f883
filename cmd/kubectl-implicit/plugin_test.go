package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

func hierarchyOf(name string, st v1alpha1.HierarchyStatus) v1alpha1.Hierarchy {
	h := v1alpha1.Hierarchy{Status: st}
	h.Name = name
	return h
}

func TestPrintForest(t *testing.T) {
	t.Parallel()
	list := &v1alpha1.HierarchyList{Items: []v1alpha1.Hierarchy{
		hierarchyOf("org", v1alpha1.HierarchyStatus{Tenant: true, Children: []string{"team-a", "team-b"}}),
		hierarchyOf("team-a", v1alpha1.HierarchyStatus{Tenant: true, Ancestors: []string{"org"}, Children: []string{"team-a-1"}}),
		hierarchyOf("team-a-1", v1alpha1.HierarchyStatus{Tenant: true, Ancestors: []string{"team-a", "org"}}),
		hierarchyOf("team-b", v1alpha1.HierarchyStatus{Tenant: true, Ancestors: []string{"org"}}),
		hierarchyOf("c1", v1alpha1.HierarchyStatus{Tenant: true, Parent: "c2", Problems: []v1alpha1.HierarchyProblem{{Reason: "Cycle", Message: "namespaces c1 -> c2 form a parent cycle"}}}),
		hierarchyOf("kube-system", v1alpha1.HierarchyStatus{}),
	}}
	var out bytes.Buffer
	if err := (&options{}).printForest(&out, list); err != nil {
		t.Fatal(err)
	}
	want := `c1  [Cycle: namespaces c1 -> c2 form a parent cycle]
kube-system  [not a tenant]
org
├── team-a
│   └── team-a-1
└── team-b
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

func TestPrintPreviews(t *testing.T) {
	t.Parallel()
	p := &v1alpha1.Preview{Spec: v1alpha1.PreviewSpec{Resource: "rolebindings"}, Status: v1alpha1.PreviewStatus{
		Operation: "Update", Name: "x", Reached: 1, // team-a; team-b shadows it
		Changed: []v1alpha1.NamespaceChange{{Namespace: "team-a", Type: "Modified",
			Before: &v1alpha1.ItemSummary{Source: v1alpha1.ItemReference{Namespace: "implicit-global", Name: "x", Scope: "global"}},
			After:  &v1alpha1.ItemSummary{Source: v1alpha1.ItemReference{Namespace: "org", Name: "x", Scope: "parent"}, Overlays: []string{"team-a/x"}}}},
		Unchanged: []v1alpha1.NamespaceUnchanged{{Namespace: "team-b", Reason: "Shadowed", By: "team-b"}},
	}}
	p.Namespace = "org"
	var out bytes.Buffer
	if err := (&options{}).printPreviews(&out, []*v1alpha1.Preview{p}, nil); err != nil {
		t.Fatal(err)
	}
	want := `rolebindings org/x (Update): reaches 1 namespace(s) besides its own, changes 1, kept unchanged 1.
NAMESPACE   CHANGE      BEFORE                       AFTER                          WHY
team-a      Modified    implicit-global/x (global)   org/x (parent) +1 overlay(s)   -
team-b      Unchanged   -                            -                              Shadowed by team-b
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}

// TestPrintPreviewOverCopy: applying a source over a materialized copy
// creates a source, as the Preview says, but kubectl apply patches an object
// that exists (kubectl diff shows the copy changing): the header says both.
func TestPrintPreviewOverCopy(t *testing.T) {
	t.Parallel()
	p := &v1alpha1.Preview{Spec: v1alpha1.PreviewSpec{Resource: "networkpolicies"}, Status: v1alpha1.PreviewStatus{
		Operation: v1alpha1.OperationCreate, Name: "allow-dns", Reached: 0,
		Changed: []v1alpha1.NamespaceChange{{Namespace: "org", Type: "Modified",
			Before: &v1alpha1.ItemSummary{Source: v1alpha1.ItemReference{Namespace: "implicit-global", Name: "allow-dns", Scope: "global"}},
			After:  &v1alpha1.ItemSummary{Source: v1alpha1.ItemReference{Namespace: "org", Name: "allow-dns", Scope: "local"}}}},
	}}
	p.Namespace = "org"
	live := &unstructured.Unstructured{}
	live.SetName("allow-dns")
	live.SetNamespace("org")
	live.SetLabels(map[string]string{v1alpha1.LabelMaterialized: "true", v1alpha1.LabelSourceNamespace: "implicit-global"})
	var out bytes.Buffer
	if err := (&options{}).printPreviews(&out, []*v1alpha1.Preview{p}, map[*v1alpha1.Preview]string{p: copyOf(live)}); err != nil {
		t.Fatal(err)
	}
	want := "networkpolicies org/allow-dns (Create, over its materialized copy of implicit-global/allow-dns): reaches 0 namespace(s) besides its own, changes 1, kept unchanged 0.\n"
	if got, _, _ := strings.Cut(out.String(), "NAMESPACE"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if c := copyOf(nil); c != "" {
		t.Errorf("copyOf(nil) = %q, want none", c)
	}
	live.SetLabels(nil)
	if c := copyOf(live); c != "" {
		t.Errorf("copyOf(an object of its own) = %q, want none", c)
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--help"}, exitOK},
		{[]string{"why", "only-one-arg"}, exitError},
		{[]string{"tree", "-o", "xml", "ns"}, exitError},
		{[]string{"diff"}, exitDiffError},
		{[]string{"diff", "-f", "/nonexistent/file.yaml"}, exitDiffError},
		{[]string{"rollout", "--help"}, exitOK},
		{[]string{"rollout", "status", "rolebinding"}, exitError},
		{[]string{"rollout", "promote", "-o", "xml", "rolebinding", "x"}, exitError},
		{[]string{"rollout", "abort", "rolebinding", "x", "y"}, exitError},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), tc.args, genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d (%s)", tc.args, code, tc.code, errOut.String())
		}
	}
}
