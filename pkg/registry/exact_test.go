package registry_test

import (
	"context"
	"reflect"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// pastViewer is a fakeViewer that also lists its views at past versions:
// past holds each servable version's items; any other version is compacted.
type pastViewer struct {
	*fakeViewer
	past map[string][]runtime.Object

	mu    sync.Mutex
	asked []string // "version namespace name"
}

var _ registry.PastLister = &pastViewer{}

// ListAt implements registry.PastLister.
func (p *pastViewer) ListAt(_ context.Context, namespace, name, version string) ([]runtime.Object, error) {
	p.mu.Lock()
	p.asked = append(p.asked, version+" "+namespace+" "+name)
	p.mu.Unlock()
	items, ok := p.past[version]
	if !ok {
		return nil, apierrors.NewResourceExpired("too old resource version: " + version)
	}
	var out []runtime.Object
	for _, it := range items {
		m, _ := meta.Accessor(it)
		if (namespace == "" || m.GetNamespace() == namespace) && (name == "" || m.GetName() == name) {
			obj := it.DeepCopyObject()
			acc, _ := meta.Accessor(obj)
			acc.SetResourceVersion(version)
			out = append(out, obj)
		}
	}
	return out, nil
}

func (p *pastViewer) calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.asked...)
}

// TestListExactPast checks that an exact list (resourceVersionMatch=Exact)
// of a version older than the view's answers the view at that version, as
// kube-apiserver answers an older revision, with selectors and pages, its
// continuations read the same state on any replica, and that 410 comes
// only for a version the viewer cannot list (compacted).
func TestListExactPast(t *testing.T) {
	t.Parallel()
	const old, compacted = "f7.v4700", "f7.v4600"
	pastItems := []runtime.Object{
		viewRoleBinding("a", "gone", merge.ScopeLocal, "a"),
		viewRoleBinding("a", "x", merge.ScopeLocal, "a"),
		viewRoleBinding("a-b", "p", merge.ScopeLocal, "a-b"),
		viewRoleBinding("a-b", "q", merge.ScopeGlobal, "implicit-global"),
	}
	newStorage := func() (*registry.Storage, *pastViewer) {
		v := &pastViewer{fakeViewer: newFakeViewer("rolebindings", pagedItems()...), past: map[string][]runtime.Object{old: pastItems}}
		return registry.NewStorage(group, kinds.RoleBindings(), v), v
	}
	exact := func(rv string) *metainternalversion.ListOptions {
		return &metainternalversion.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact}
	}

	s, _ := newStorage()
	l, err := listPage(t, s, exact(old))
	if err != nil {
		t.Fatalf("an exact list of an older version: %v, want that state", err)
	}
	if want := []string{"a-b/p", "a-b/q", "a/gone", "a/x"}; !reflect.DeepEqual(names(l), want) || l.ResourceVersion != old {
		t.Errorf("an exact list at %s = %v at %q, want %v at %s", old, names(l), l.ResourceVersion, want, old)
	}

	// Selectors apply to that state.
	opts := exact(old)
	opts.LabelSelector = labels.SelectorFromSet(labels.Set{"team": "a"})
	if l, err := listPage(t, s, opts); err != nil || !reflect.DeepEqual(names(l), []string{"a/gone", "a/x"}) {
		t.Errorf("an exact list at %s with team=a = %v, %v; want a/gone and a/x", old, l, err)
	}

	// Pages: the first from one replica, the rest from another (no
	// snapshot there), all of that state.
	opts = exact(old)
	opts.Limit = 3
	first, err := listPage(t, s, opts)
	if err != nil || len(first.Items) != 3 || first.Continue == "" || first.ResourceVersion != old {
		t.Fatalf("the first page of an exact list at %s: %v, %v", old, first, err)
	}
	other, otherViewer := newStorage()
	rest, err := listPage(t, other, &metainternalversion.ListOptions{Limit: 3, Continue: first.Continue})
	if err != nil {
		t.Fatalf("its continuation on another replica: %v, want the rest of that state", err)
	}
	if got := append(names(first), names(rest)...); !reflect.DeepEqual(got, []string{"a-b/p", "a-b/q", "a/gone", "a/x"}) || rest.ResourceVersion != old || rest.Continue != "" {
		t.Errorf("the pages of an exact list at %s: %v, the last at %q (continue %q)", old, got, rest.ResourceVersion, rest.Continue)
	}
	if calls := otherViewer.calls(); !reflect.DeepEqual(calls, []string{old + "  "}) {
		t.Errorf("the other replica listed the past %v, want once at %s", calls, old)
	}

	// A name field selector asks the viewer for that name only.
	opts = exact(old)
	opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", "x")
	s, v := newStorage()
	if l, err := listPage(t, s, opts); err != nil || !reflect.DeepEqual(names(l), []string{"a/x"}) {
		t.Errorf("an exact list at %s of name x = %v, %v; want a/x", old, l, err)
	}
	if calls := v.calls(); !reflect.DeepEqual(calls, []string{old + "  x"}) {
		t.Errorf("the viewer was asked %v, want the name x at %s", calls, old)
	}

	// The current version is the current view; a compacted one is 410.
	if l, err := listPage(t, s, exact(fakeRV)); err != nil || len(l.Items) != 5 || l.ResourceVersion != fakeRV {
		t.Errorf("an exact list at the current version: %v, %v", l, err)
	}
	if _, err := listPage(t, s, exact(compacted)); !apierrors.IsResourceExpired(err) {
		t.Errorf("an exact list of a compacted version: %v, want 410 Expired", err)
	}
}
