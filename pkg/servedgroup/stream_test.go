package servedgroup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// wholeViewer is a view without its stream: what lists were served from
// before they streamed.
type wholeViewer struct {
	registry.Viewer
	registry.NamedLister
}

// streamFixture is a synced mux of role bindings: global ones, and local
// ones in namespaces whose names order differently as names and as keys
// ("a" < "a-b" < "a.c" by name, "a-b/" < "a.c/" < "a/" by key).
func streamFixture(t *testing.T) (streamed, whole *registry.Storage) {
	t.Helper()
	const global = "implicit-global"
	kind := kinds.RoleBindings()
	objs := views.NewObjects(kinds.NewObjects([]kinds.Kind{kind}), 0)
	m := watchmux.New(merge.Policy{GlobalNamespace: global}, []string{kind.Resource()}, objs, watchmux.Options{})
	binding := func(ns, name string, lbls map[string]string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name), ResourceVersion: "7", Labels: lbls,
				Annotations: map[string]string{"note": "<&>"}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects: []rbacv1.Subject{{Kind: "Group", Name: "team-" + name}},
		}
	}
	m.OnNamespace(testfixture.Namespace(global), false)
	for _, ns := range []string{"a", "a-b", "a.c", "b", "team-x", "team-y"} {
		m.OnNamespace(testfixture.Namespace(ns), false)
		m.OnSource(kind.Resource(), binding(ns, "local-"+ns, map[string]string{"tier": ns}), false)
	}
	for i := range 4 {
		m.OnSource(kind.Resource(), binding(global, fmt.Sprintf("global-%d", i), map[string]string{"tier": fmt.Sprintf("g%d", i%2)}), false)
	}
	// A local binding shadowing a global one.
	m.OnSource(kind.Resource(), binding("b", "global-1", nil), false)
	m.MarkSynced()
	v := views.New(schema.GroupResource{Group: GroupName, Resource: kind.Resource()}, m)
	return registry.NewStorage(GroupName, kind, v), registry.NewStorage(GroupName, kind, wholeViewer{v, v})
}

// encodeJSON encodes obj as the served group answers in JSON.
func encodeJSON(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	codecs := NewCodecs(NewScheme(kinds.BuiltIns()))
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	enc := unstructuredSerializer{codecs}.EncoderForVersion(info.Serializer, SchemeGroupVersion)
	var buf bytes.Buffer
	if err := enc.Encode(obj, &buf); err != nil {
		t.Fatalf("encoding %T: %v", obj, err)
	}
	return buf.Bytes()
}

// TestStreamedListsAsWhole lists role bindings streamed and whole, with
// selectors, namespaces, limits and continuations: the same bytes, page by
// page, and the same tables.
func TestStreamedListsAsWhole(t *testing.T) {
	t.Parallel()
	streamed, whole := streamFixture(t)
	tests := []struct {
		name      string
		namespace string
		opts      metainternalversion.ListOptions
	}{
		{name: "every namespace"},
		{name: "one namespace", namespace: "b"},
		{name: "a namespace that does not exist", namespace: "nope"},
		{name: "label selector", opts: metainternalversion.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"tier": "g1"})}},
		{name: "name", opts: metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "global-1")}},
		{name: "namespace field", opts: metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.namespace", "a-b")}},
		{name: "pages of 4", opts: metainternalversion.ListOptions{Limit: 4}},
		{name: "pages of 1 of one namespace", namespace: "a", opts: metainternalversion.ListOptions{Limit: 1}},
		{name: "pages of 3, filtered", opts: metainternalversion.ListOptions{Limit: 3, LabelSelector: labels.SelectorFromSet(labels.Set{"tier": "g0"})}},
		{name: "any version ignores limit", opts: metainternalversion.ListOptions{Limit: 2, ResourceVersion: "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := genericapirequest.WithNamespace(context.Background(), tt.namespace)
			opts := tt.opts
			for page := 0; ; page++ {
				got, err := streamed.List(ctx, &opts)
				if err != nil {
					t.Fatalf("page %d streamed: %v", page, err)
				}
				want, err := whole.List(ctx, &opts)
				if err != nil {
					t.Fatalf("page %d whole: %v", page, err)
				}
				if g, w := encodeJSON(t, got), encodeJSON(t, want); !bytes.Equal(g, w) {
					t.Fatalf("page %d: streamed\n%s\nwhole\n%s", page, g, w)
				}
				if opts.Continue == "" && (opts.Limit == 0 || opts.ResourceVersion == "0") {
					if _, ok := got.(*registry.StreamList); !ok {
						t.Errorf("an unlimited list is a %T, not streamed", got)
					}
				}
				gt, err := streamed.ConvertToTable(ctx, got, &metav1.TableOptions{})
				if err != nil {
					t.Fatalf("table streamed: %v", err)
				}
				wt, err := whole.ConvertToTable(ctx, want, &metav1.TableOptions{})
				if err != nil {
					t.Fatalf("table whole: %v", err)
				}
				if g, w := marshal(t, gt), marshal(t, wt); !bytes.Equal(g, w) {
					t.Fatalf("page %d table: streamed\n%s\nwhole\n%s", page, g, w)
				}
				l, _ := meta.ListAccessor(want)
				if l.GetContinue() == "" {
					if page == 0 && opts.Limit > 0 && opts.ResourceVersion == "" && meta.LenList(want) > int(opts.Limit) {
						t.Errorf("no continuation of %d items", meta.LenList(want))
					}
					break
				}
				opts.Continue = l.GetContinue()
			}
		})
	}
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshaling %T: %v", v, err)
	}
	return b
}
