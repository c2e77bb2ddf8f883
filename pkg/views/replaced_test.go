package views_test

import (
	"context"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
)

// TestContinueOfAReplacedNamespace: a continue token minted for team-x's
// list reads nothing of team-x once it was deleted and created again
// (another uid): 410 Expired, as a watch from that version answers,
// rather than the old namespace's items from the first page's kept copy.
func TestContinueOfAReplacedNamespace(t *testing.T) {
	t.Parallel()
	// Each write at the next revision, as the informers see them.
	rev := 0
	at := func(m *metav1.ObjectMeta) { rev++; m.ResourceVersion = strconv.Itoa(rev) }
	nsAt := func(ns *corev1.Namespace) { at(&ns.ObjectMeta) }
	old := namespace("team-x", nsAt)
	m := newMux(rolebindings.Resource, []*corev1.Namespace{namespace(global, nsAt), old},
		roleBinding("team-x", "a", at), roleBinding("team-x", "b", at), roleBinding("team-x", "c", at))
	s := registry.NewStorage(group, kinds.RoleBindings(), views.New(rolebindings, m))
	ctx := genericapirequest.WithNamespace(context.Background(), "team-x")
	first, err := s.List(ctx, &metainternalversion.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := meta.ListAccessor(first)
	if l.GetContinue() == "" {
		t.Fatal("the first page has no continue token")
	}
	for _, name := range []string{"a", "b", "c"} {
		m.OnSource(rolebindings.Resource, roleBinding("team-x", name, at), true)
	}
	gone := old.DeepCopy()
	at(&gone.ObjectMeta)
	m.OnNamespace(gone, true)
	again := namespace("team-x", nsAt)
	again.UID = "another-uid"
	m.OnNamespace(again, false)
	m.OnSource(rolebindings.Resource, roleBinding("team-x", "z", at), false)

	next, err := s.List(ctx, &metainternalversion.ListOptions{Limit: 1, Continue: l.GetContinue()})
	if err == nil {
		items, _ := meta.ExtractList(next)
		t.Fatalf("continue after team-x's replacement served %s, want 410 Expired", summaries(t, items))
	}
	if !apierrors.IsResourceExpired(err) {
		t.Fatalf("continue after team-x's replacement: %v, want 410 Expired", err)
	}
}
