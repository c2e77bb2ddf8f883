package registry_test

import (
	"context"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// namedViewer is a fakeViewer that can also list one name.
type namedViewer struct {
	*fakeViewer
	mu    sync.Mutex
	named []string // "namespace/name"
}

var _ registry.NamedLister = &namedViewer{}

// ListNamed implements registry.NamedLister.
func (n *namedViewer) ListNamed(ctx context.Context, namespace, name string) ([]runtime.Object, string, error) {
	n.mu.Lock()
	n.named = append(n.named, namespace+"/"+name)
	n.mu.Unlock()
	items, rv, err := n.fakeViewer.List(ctx, namespace)
	var out []runtime.Object
	for _, it := range items {
		if m, _ := meta.Accessor(it); m.GetName() == name {
			out = append(out, it)
		}
	}
	return out, rv, err
}

// TestListNamed: a list with a metadata.name field selector asks a viewer
// that can for that name only ("who sees this global object?"), and a
// viewer that can't for everything, filtered after.
func TestListNamed(t *testing.T) {
	t.Parallel()
	items := []runtime.Object{
		viewRoleBinding("team-a", "org-viewers", merge.ScopeGlobal, "implicit-global"),
		viewRoleBinding("team-b", "org-viewers", merge.ScopeGlobal, "implicit-global"),
		viewRoleBinding("team-a", "other", merge.ScopeLocal, "team-a"),
	}
	opts := &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "org-viewers")}

	nv := &namedViewer{fakeViewer: newFakeViewer("rolebindings", items...)}
	s := registry.NewStorage(group, kinds.RoleBindings(), nv)
	out, err := s.List(genericapirequest.NewContext(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := meta.ExtractList(out); len(got) != 2 {
		t.Errorf("named list: %d items, want the 2 org-viewers", len(got))
	}
	if _, lists := nv.calls(); len(nv.named) != 1 || nv.named[0] != "/org-viewers" || len(lists) != 1 {
		t.Errorf("asked ListNamed %v (want [/org-viewers]) and List %v (want only ListNamed's own)", nv.named, lists)
	}

	plain := newFakeViewer("rolebindings", items...)
	out, err = registry.NewStorage(group, kinds.RoleBindings(), plain).List(genericapirequest.NewContext(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := meta.ExtractList(out); len(got) != 2 {
		t.Errorf("plain viewer: %d items, want the 2 org-viewers", len(got))
	}
}
