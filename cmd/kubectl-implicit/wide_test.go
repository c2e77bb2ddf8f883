package main

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestTreeNotTenantMarks: tree tells the global namespace from one that
// opted out and one the server excludes; -o wide adds columns.
func TestTreeNotTenantMarks(t *testing.T) {
	t.Parallel()
	list := &v1alpha1.HierarchyList{Items: []v1alpha1.Hierarchy{
		hierarchyOf("implicit-global", v1alpha1.HierarchyStatus{NotTenant: v1alpha1.NotTenantGlobal}),
		hierarchyOf("legacy", v1alpha1.HierarchyStatus{NotTenant: v1alpha1.NotTenantOptedOut}),
		hierarchyOf("kube-system", v1alpha1.HierarchyStatus{NotTenant: v1alpha1.NotTenantExcluded}),
		hierarchyOf("org", v1alpha1.HierarchyStatus{Tenant: true, Children: []string{"team"}}),
		hierarchyOf("team", v1alpha1.HierarchyStatus{Tenant: true, Parent: "org", Ancestors: []string{"org"}}),
	}}
	var out bytes.Buffer
	if err := (&options{}).printForest(&out, list); err != nil {
		t.Fatal(err)
	}
	want := `implicit-global  [global: every tenant inherits its sources]
kube-system  [not a tenant: excluded by the server]
legacy  [opted out: implicit.dev/inherit=false, inherits nothing]
org
└── team
`
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
	out.Reset()
	if err := (&options{output: "wide"}).printForest(&out, list); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"NAMESPACE         TENANT          PARENT   ANCESTORS   CHILDREN   PROBLEMS\n",
		"implicit-global   no (Global)     <none>   0           0          <none>\n",
		"legacy            no (OptedOut)   <none>",
		"└── team          yes             org      1           0          <none>\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("-o wide lacks %q:\n%s", line, out.String())
		}
	}
}

// TestWhyWide: -o wide adds each scope's message.
func TestWhyWide(t *testing.T) {
	t.Parallel()
	e := testExplanation()
	e.Status.Scopes[0].Message = "excluded by team-b's implicit.dev/exclude"
	var narrow, wide bytes.Buffer
	if err := printExplanation(&narrow, e, false); err != nil {
		t.Fatal(err)
	}
	if err := printExplanation(&wide, e, true); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(narrow.String(), "MESSAGE") || !strings.Contains(wide.String(), "MESSAGE") || !strings.Contains(wide.String(), "excluded by team-b's implicit.dev/exclude") {
		t.Errorf("narrow\n%s\nwide\n%s", narrow.String(), wide.String())
	}
}

// TestReachedBy: how a view item shows a source: as its source, through
// the source's candidate (a canary), as an overlay; a candidate reaches
// the items it stages.
func TestReachedBy(t *testing.T) {
	t.Parallel()
	item := func(ns, sourceNS, overlays, candidate string) unstructured.Unstructured {
		u := unstructured.Unstructured{}
		u.SetName("ci-bot")
		u.SetNamespace(ns)
		u.SetLabels(map[string]string{v1alpha1.LabelSourceNamespace: sourceNS, v1alpha1.LabelScope: "global"})
		ann := map[string]string{}
		if overlays != "" {
			ann[v1alpha1.AnnotationOverlays] = overlays
		}
		if candidate != "" {
			ann[v1alpha1.AnnotationCandidate] = candidate
		}
		u.SetAnnotations(ann)
		return u
	}
	for _, tc := range []struct {
		name                  string
		it                    unstructured.Unstructured
		source, stable        string
		candidates            []string
		wantOK                bool
		wantAs, wantCandidate string
	}{
		{"its source", item("team-a", "g", "", ""), "ci-bot", "", []string{"ci-bot.next"}, true, "source", ""},
		{"a canary sees the candidate", item("team-b", "g", "", "ci-bot.next"), "ci-bot", "", []string{"ci-bot.next"}, true, "candidate", "ci-bot.next"},
		{"an overlay", item("team-c", "org", "g/ci-bot", ""), "ci-bot", "", nil, true, "overlay", ""},
		{"another source's item", item("team-d", "org", "", ""), "ci-bot", "", nil, false, "", ""},
		{"the candidate reaches its canary", item("team-b", "g", "", "ci-bot.next"), "ci-bot.next", "ci-bot", nil, true, "candidate", "ci-bot.next"},
		{"the candidate does not reach the others", item("team-a", "g", "", ""), "ci-bot.next", "ci-bot", nil, false, "", ""},
	} {
		r, ok := reachedBy(tc.it, "g", tc.source, tc.stable, tc.candidates)
		if ok != tc.wantOK || ok && (r.As != tc.wantAs || r.Candidate != tc.wantCandidate) {
			t.Errorf("%s: %+v, %v; want %q %q, %v", tc.name, r, ok, tc.wantAs, tc.wantCandidate, tc.wantOK)
		}
	}
}
