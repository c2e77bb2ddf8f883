package answers_test

import (
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestParams: a paramRef resolves in a namespace's view, by name or by
// selector over the view items' labels, excluded items left out, each param
// naming its winning source.
func TestParams(t *testing.T) {
	t.Parallel()
	m := answersOf(t, true, questionsWorld())
	got, err := m.Params(rbResource, "team-a", "g-open", nil)
	want := []v1alpha1.PolicyParam{{Name: "g-open", Scope: "parent", Namespace: "org"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("by name: %+v, %v; want %+v", got, err, want)
	}
	sel, err := labels.Parse("app in (g-lock, o-x)")
	if err != nil {
		t.Fatal(err)
	}
	// o-x is excluded in team-a.
	got, err = m.Params(rbResource, "team-a", "", sel)
	want = []v1alpha1.PolicyParam{{Name: "g-lock", Scope: "global", Namespace: global}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("by selector: %+v, %v; want %+v", got, err, want)
	}
	if got, err := m.Params(rbResource, "team-a", "o-x", nil); err != nil || len(got) != 0 {
		t.Errorf("excluded by name: %+v, %v; want none", got, err)
	}
	ls, ok, err := m.NamespaceLabels("team-a")
	if err != nil || !ok || ls[v1alpha1.LabelParent] != "org" {
		t.Errorf("NamespaceLabels(team-a): %v %v %v", ls, ok, err)
	}
	if _, ok, err := m.NamespaceLabels("nowhere"); err != nil || ok {
		t.Errorf("NamespaceLabels(nowhere): %v %v", ok, err)
	}
	if _, err := answersOf(t, false, questionsWorld()).Params(rbResource, "team-a", "g-open", nil); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("before sync: %v, want not synced", err)
	}
}
