package watchmux

import (
	"fmt"
	"testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// TestLineageCacheBounded checks that the lineage cache holds existing
// namespaces only: questions about any number of names that don't exist
// leave nothing behind, and a deleted namespace's entry goes with it.
func TestLineageCacheBounded(t *testing.T) {
	t.Parallel()
	s := newState(merge.Policy{GlobalNamespace: "implicit-global", MaxDepth: 32}, []string{"rolebindings"})
	s.setNamespaceLocked("org", &merge.Namespace{Name: "org"})
	s.setNamespaceLocked("team", &merge.Namespace{Name: "team", Labels: map[string]string{v1alpha1.LabelParent: "org"}})
	for i := range 1_000 {
		if l := s.lineage(fmt.Sprintf("ghost-%d", i)); l.Namespace != nil {
			t.Fatalf("ghost-%d resolved to %v", i, l.Namespace)
		}
	}
	if l := s.lineage("team"); len(l.Ancestors) != 1 || l.Ancestors[0].Name != "org" {
		t.Fatalf("team's ancestors = %v, want org", l.Ancestors)
	}
	if n := len(s.lineages); n != 1 {
		t.Errorf("%d cached lineages after 1,000 missing names and team, want 1", n)
	}
	t.Log("deleting org drops team's entry (its walk read org); deleting team drops nothing more")
	s.setNamespaceLocked("org", nil)
	if _, ok := s.lineages["team"]; ok {
		t.Error("team's lineage is still cached after its parent was deleted")
	}
	if l := s.lineage("team"); len(l.Ancestors) != 0 || l.Problem == nil || l.Problem.Reason != merge.ProblemMissingParent {
		t.Errorf("team after org's deletion: ancestors %v, problem %+v; want none and MissingParent", l.Ancestors, l.Problem)
	}
	s.setNamespaceLocked("team", nil)
	if n := len(s.lineages); n != 0 {
		t.Errorf("%d cached lineages once every namespace is gone, want 0", n)
	}
}
