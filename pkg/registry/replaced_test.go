package registry_test

import (
	"context"
	"sort"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// identityViewer is a fakeViewer that says which namespace each name
// holds now (NamespaceIdentifier), and, when streams is set, streams its
// lists (Streamer).
type identityViewer struct {
	*fakeViewer
	streams bool

	uidMu sync.Mutex
	uids  map[string]types.UID
}

var _ registry.NamespaceIdentifier = &identityViewer{}

// NamespaceUID implements registry.NamespaceIdentifier.
func (v *identityViewer) NamespaceUID(namespace string) types.UID {
	v.uidMu.Lock()
	defer v.uidMu.Unlock()
	return v.uids[namespace]
}

func (v *identityViewer) setUID(namespace string, uid types.UID) {
	v.uidMu.Lock()
	defer v.uidMu.Unlock()
	v.uids[namespace] = uid
}

// streamingViewer is an identityViewer that streams its lists.
type streamingViewer struct{ *identityViewer }

var _ registry.Streamer = streamingViewer{}

// Stream implements registry.Streamer from the fake's list.
func (v streamingViewer) Stream(ctx context.Context, namespace, _ string) (registry.ItemStream, string, error) {
	items, rv, err := v.List(ctx, namespace)
	if err != nil {
		return nil, "", err
	}
	s := sliceStream{}
	for _, it := range items {
		m, _ := meta.Accessor(it)
		s.keys = append(s.keys, m.GetNamespace()+"/"+m.GetName())
		s.items = append(s.items, it)
	}
	sort.Sort(s)
	return s, rv, nil
}

// sliceStream is an ItemStream of fixed items, sorted by key.
type sliceStream struct {
	keys  []string
	items []runtime.Object
}

func (s sliceStream) Len() int           { return len(s.keys) }
func (s sliceStream) Less(i, j int) bool { return s.keys[i] < s.keys[j] }
func (s sliceStream) Swap(i, j int) {
	s.keys[i], s.keys[j] = s.keys[j], s.keys[i]
	s.items[i], s.items[j] = s.items[j], s.items[i]
}

func (s sliceStream) Walk(after string, yield func(string, runtime.Object) bool) error {
	for i, k := range s.keys {
		if k > after && !yield(k, s.items[i].DeepCopyObject()) {
			return nil
		}
	}
	return nil
}

func (s sliceStream) CountAfter(after string) (int64, error) {
	var n int64
	for _, k := range s.keys {
		if k > after {
			n++
		}
	}
	return n, nil
}

// TestContinueOfAReplacedNamespace: a continue token of a namespace's list
// does not read the first page's kept snapshot once that namespace was
// deleted and created again (another uid, someone else's perhaps): 410
// Expired, whose fresh token continues today's view, as a watch or an
// exact list of the old namespace's version answers (docs/security.md).
func TestContinueOfAReplacedNamespace(t *testing.T) {
	t.Parallel()
	const later = "f7.v4712"
	for _, streams := range []bool{false, true} {
		name := "whole view"
		if streams {
			name = "streamed"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			iv := &identityViewer{fakeViewer: newFakeViewer("rolebindings", pagedItems()...), uids: map[string]types.UID{"a-b": "old-uid", "a": "a-uid"}}
			var viewer registry.Viewer = iv
			if streams {
				viewer = streamingViewer{iv}
			}
			s := registry.NewStorage(group, kinds.RoleBindings(), viewer)
			ctx := genericapirequest.WithNamespace(context.Background(), "a-b")
			list := func(opts *metainternalversion.ListOptions) (*rbacv1.RoleBindingList, error) {
				obj, err := s.List(ctx, opts)
				if err != nil {
					return nil, err
				}
				return obj.(*rbacv1.RoleBindingList), nil
			}
			first, err := list(&metainternalversion.ListOptions{Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			if got := names(first); len(got) != 2 || first.Continue == "" {
				t.Fatalf("first page = %v (continue %q), want two items and a token", got, first.Continue)
			}
			// a-b deleted and created again: its new view has its own items.
			iv.setUID("a-b", "new-uid")
			iv.change(later,
				viewRoleBinding("a", "x", merge.ScopeLocal, "a"),
				viewRoleBinding("a-b", "s", merge.ScopeLocal, "a-b"),
			)
			second, err := list(&metainternalversion.ListOptions{Limit: 2, Continue: first.Continue})
			if err == nil {
				t.Fatalf("continue after a-b's replacement = %v at %s, want 410 Expired", names(second), second.ResourceVersion)
			}
			var status apierrors.APIStatus
			if !apierrors.IsResourceExpired(err) || !errorsAs(err, &status) || status.Status().ListMeta.Continue == "" {
				t.Fatalf("continue after a-b's replacement: %v, want 410 Expired with a fresh token", err)
			}
			rest, err := list(&metainternalversion.ListOptions{Limit: 2, Continue: status.Status().ListMeta.Continue})
			if err != nil {
				t.Fatalf("the fresh token: %v", err)
			}
			if got := names(rest); len(got) != 1 || got[0] != "a-b/s" || rest.ResourceVersion != later {
				t.Errorf("the fresh token's page = %v at %s, want [a-b/s] at %s (today's a-b)", got, rest.ResourceVersion, later)
			}
		})
	}
}
