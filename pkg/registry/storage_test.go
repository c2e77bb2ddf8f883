package registry_test

import (
	"context"
	"reflect"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// viewItems are the rolebindings views of two tenants.
func viewItems() []runtime.Object {
	return []runtime.Object{
		viewRoleBinding("team-a", "local-rb", merge.ScopeLocal, "team-a"),
		viewRoleBinding("team-a", "org-viewers", merge.ScopeGlobal, "implicit-global"),
		viewRoleBinding("team-b", "dept-rb", merge.ScopeParent, "dept"),
		viewRoleBinding("team-b", "org-viewers", merge.ScopeGlobal, "implicit-global"),
	}
}

func TestStorageGet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		ctx       context.Context
		item      string
		viewerErr error
		want      string // "namespace/name" of the item; "" for an error
		wantErr   func(error) bool
		wantGets  []string
	}{
		{
			name: "namespace from the request", ctx: genericapirequest.WithNamespace(context.Background(), "team-a"),
			item: "org-viewers", want: "team-a/org-viewers", wantGets: []string{"team-a/org-viewers"},
		},
		{
			name: "no namespace in the context", ctx: context.Background(),
			item: "org-viewers", wantErr: apierrors.IsBadRequest,
		},
		{
			name: "empty namespace in the context", ctx: genericapirequest.WithNamespace(context.Background(), ""),
			item: "org-viewers", wantErr: apierrors.IsBadRequest,
		},
		{
			name: "NotFound passes through", ctx: genericapirequest.WithNamespace(context.Background(), "team-b"),
			item: "local-rb", wantErr: apierrors.IsNotFound, wantGets: []string{"team-b/local-rb"},
		},
		{
			name: "other API errors pass through", ctx: genericapirequest.WithNamespace(context.Background(), "team-a"),
			item: "org-viewers", viewerErr: apierrors.NewServiceUnavailable("sources not synced"),
			wantErr: apierrors.IsServiceUnavailable, wantGets: []string{"team-a/org-viewers"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			viewer := newFakeViewer("rolebindings", viewItems()...)
			viewer.err = tt.viewerErr
			s := registry.NewStorage(group, kinds.RoleBindings(), viewer)
			got, err := s.Get(tt.ctx, tt.item, &metav1.GetOptions{})
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Fatalf("Get(%q) = %v, %v; want a matching error", tt.item, got, err)
				}
			} else {
				if err != nil {
					t.Fatalf("Get(%q): %v", tt.item, err)
				}
				if k := keys([]runtime.Object{got}); k[0] != tt.want {
					t.Errorf("Get(%q) = %s, want %s", tt.item, k[0], tt.want)
				}
				if _, ok := got.(*rbacv1.RoleBinding); !ok {
					t.Errorf("Get returned a %T, want *rbacv1.RoleBinding", got)
				}
			}
			if gets, _ := viewer.calls(); !reflect.DeepEqual(gets, tt.wantGets) {
				t.Errorf("viewer Get calls = %q, want %q", gets, tt.wantGets)
			}
		})
	}
}

func TestStorageList(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		namespace string // of the request; "" lists all namespaces
		opts      *metainternalversion.ListOptions
		viewerErr error
		want      []string
		wantErr   func(error) bool
		// wantLists are the namespaces the viewer was asked for.
		wantLists []string
	}{
		{
			name: "one namespace", namespace: "team-a",
			opts:      &metainternalversion.ListOptions{},
			want:      []string{"team-a/local-rb", "team-a/org-viewers"},
			wantLists: []string{"team-a"},
		},
		{
			name: "nil options", namespace: "team-b",
			want:      []string{"team-b/dept-rb", "team-b/org-viewers"},
			wantLists: []string{"team-b"},
		},
		{
			name: "all namespaces",
			opts: &metainternalversion.ListOptions{},
			want: []string{"team-a/local-rb", "team-a/org-viewers", "team-b/dept-rb", "team-b/org-viewers"},
			// The empty namespace asks the viewer for every namespace.
			wantLists: []string{""},
		},
		{
			name:      "label selector on scope, all namespaces",
			opts:      &metainternalversion.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{v1alpha1.LabelScope: "global"})},
			want:      []string{"team-a/org-viewers", "team-b/org-viewers"},
			wantLists: []string{""},
		},
		{
			name:      "label selector on a source label, one namespace",
			namespace: "team-b",
			opts:      &metainternalversion.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"team": "team-b", v1alpha1.LabelScope: "parent"})},
			want:      []string{"team-b/dept-rb"},
			wantLists: []string{"team-b"},
		},
		{
			name:      "label selector matching nothing",
			opts:      &metainternalversion.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{v1alpha1.LabelScope: "nowhere"})},
			want:      []string{},
			wantLists: []string{""},
		},
		{
			name: "who sees this global object: scope=global and metadata.name, all namespaces",
			opts: &metainternalversion.ListOptions{
				LabelSelector: labels.SelectorFromSet(labels.Set{v1alpha1.LabelScope: "global"}),
				FieldSelector: fields.OneTermEqualSelector("metadata.name", "org-viewers"),
			},
			want:      []string{"team-a/org-viewers", "team-b/org-viewers"},
			wantLists: []string{""},
		},
		{
			name:      "metadata.name not equal",
			namespace: "team-a",
			opts:      &metainternalversion.ListOptions{FieldSelector: fields.OneTermNotEqualSelector("metadata.name", "org-viewers")},
			want:      []string{"team-a/local-rb"},
			wantLists: []string{"team-a"},
		},
		{
			name:      "metadata.namespace narrows an all-namespaces list to one view",
			opts:      &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.namespace", "team-b")},
			want:      []string{"team-b/dept-rb", "team-b/org-viewers"},
			wantLists: []string{"team-b"},
		},
		{
			name: "metadata.namespace and metadata.name together",
			opts: &metainternalversion.ListOptions{FieldSelector: fields.AndSelectors(
				fields.OneTermEqualSelector("metadata.namespace", "team-a"),
				fields.OneTermEqualSelector("metadata.name", "local-rb"))},
			want:      []string{"team-a/local-rb"},
			wantLists: []string{"team-a"},
		},
		{
			name:      "metadata.namespace of another namespace than the request's",
			namespace: "team-a",
			opts:      &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.namespace", "team-b")},
			want:      []string{},
			wantLists: []string{"team-a"},
		},
		{
			name:      "metadata.namespace not equal does not narrow",
			opts:      &metainternalversion.ListOptions{FieldSelector: fields.OneTermNotEqualSelector("metadata.namespace", "team-a")},
			want:      []string{"team-b/dept-rb", "team-b/org-viewers"},
			wantLists: []string{""},
		},
		{
			name:    "unsupported field selector",
			opts:    &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("roleRef.name", "view")},
			wantErr: apierrors.IsBadRequest,
		},
		{
			name:      "unsupported field beside a supported one",
			namespace: "team-a",
			opts: &metainternalversion.ListOptions{FieldSelector: fields.AndSelectors(
				fields.OneTermEqualSelector("metadata.name", "org-viewers"),
				fields.OneTermEqualSelector("status.phase", "x"))},
			wantErr: apierrors.IsBadRequest,
		},
		{
			name:      "viewer API errors pass through",
			namespace: "team-a",
			viewerErr: apierrors.NewServiceUnavailable("sources not synced"),
			wantErr:   apierrors.IsServiceUnavailable,
			wantLists: []string{"team-a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			viewer := newFakeViewer("rolebindings", viewItems()...)
			viewer.err = tt.viewerErr
			s := registry.NewStorage(group, kinds.RoleBindings(), viewer)
			ctx := genericapirequest.WithNamespace(context.Background(), tt.namespace)
			got, err := s.List(ctx, tt.opts)
			_, lists := viewer.calls()
			if !reflect.DeepEqual(lists, tt.wantLists) {
				t.Errorf("viewer List calls = %q, want %q", lists, tt.wantLists)
			}
			if tt.wantErr != nil {
				if !tt.wantErr(err) {
					t.Fatalf("List = %v, %v; want a matching error", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			list, ok := got.(*rbacv1.RoleBindingList)
			if !ok {
				t.Fatalf("List returned a %T, want *rbacv1.RoleBindingList", got)
			}
			items, err := meta.ExtractList(list)
			if err != nil {
				t.Fatal(err)
			}
			if k := keys(items); !reflect.DeepEqual(k, tt.want) {
				t.Errorf("List = %q, want %q", k, tt.want)
			}
			if list.ResourceVersion != fakeRV {
				t.Errorf("list resourceVersion = %q, want the viewer's %q", list.ResourceVersion, fakeRV)
			}
		})
	}
}

// TestStorageListKeepsItems checks that List returns the viewer's items unchanged.
func TestStorageListKeepsItems(t *testing.T) {
	t.Parallel()
	viewer := newFakeViewer("rolebindings", viewItems()...)
	s := registry.NewStorage(group, kinds.RoleBindings(), viewer)
	got, err := s.List(genericapirequest.WithNamespace(context.Background(), "team-a"), nil)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	want := &rbacv1.RoleBindingList{ListMeta: metav1.ListMeta{ResourceVersion: fakeRV}, Items: []rbacv1.RoleBinding{
		*viewItems()[0].(*rbacv1.RoleBinding),
		*viewItems()[1].(*rbacv1.RoleBinding),
	}}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("List = %#v\nwant %#v", got, want)
	}
}

func TestStorageMetadata(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		kind         kinds.Kind
		wantKind     string
		wantSingular string
		wantNew      runtime.Object
		wantNewList  runtime.Object
		wantSource   schema.GroupVersionResource
	}{
		{
			name: "rolebindings", kind: kinds.RoleBindings(), wantKind: "RoleBinding", wantSingular: "rolebinding",
			wantNew: &rbacv1.RoleBinding{}, wantNewList: &rbacv1.RoleBindingList{},
			wantSource: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
		},
		{
			name: "roles", kind: kinds.Roles(), wantKind: "Role", wantSingular: "role",
			wantNew: &rbacv1.Role{}, wantNewList: &rbacv1.RoleList{},
			wantSource: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
		},
		{
			name: "networkpolicies", kind: kinds.NetworkPolicies(), wantKind: "NetworkPolicy", wantSingular: "networkpolicy",
			wantNew: &networkingv1.NetworkPolicy{}, wantNewList: &networkingv1.NetworkPolicyList{},
			wantSource: schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.kind.Source != tt.wantSource || tt.kind.Resource() != tt.wantSource.Resource {
				t.Errorf("Source = %v, Resource() = %q; want %v", tt.kind.Source, tt.kind.Resource(), tt.wantSource)
			}
			s := registry.NewStorage(group, tt.kind, newFakeViewer(tt.kind.Resource()))
			if !s.NamespaceScoped() {
				t.Error("NamespaceScoped() = false, want true")
			}
			if got := s.Categories(); !reflect.DeepEqual(got, []string{"implicit"}) {
				t.Errorf("Categories() = %q, want [implicit]", got)
			}
			if got := s.Kind(); got != tt.wantKind {
				t.Errorf("Kind() = %q, want %q", got, tt.wantKind)
			}
			if got := s.GetSingularName(); got != tt.wantSingular {
				t.Errorf("GetSingularName() = %q, want %q", got, tt.wantSingular)
			}
			if got := s.New(); !reflect.DeepEqual(got, tt.wantNew) {
				t.Errorf("New() = %#v, want %#v", got, tt.wantNew)
			}
			if got := s.NewList(); !reflect.DeepEqual(got, tt.wantNewList) {
				t.Errorf("NewList() = %#v, want %#v", got, tt.wantNewList)
			}
			gv := schema.GroupVersion{Group: group, Version: "v1alpha1"}
			if got, want := s.GroupVersionKind(gv), gv.WithKind(tt.wantKind); got != want {
				t.Errorf("GroupVersionKind(%v) = %v, want %v", gv, got, want)
			}
			// New returns a fresh object each time: callers decode into it.
			if s.New() == s.New() {
				t.Error("New() returned the same object twice")
			}
		})
	}
}
