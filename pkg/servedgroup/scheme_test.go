package servedgroup_test

import (
	"encoding/json"
	"reflect"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/servedgroup"
)

func TestNewSchemeRegistersViewKinds(t *testing.T) {
	t.Parallel()
	s := servedgroup.NewScheme(kinds.BuiltIns())
	internal := schema.GroupVersion{Group: servedgroup.GroupName, Version: runtime.APIVersionInternal}

	for _, k := range kinds.BuiltIns() {
		tests := []struct {
			name string
			kind string
			want runtime.Object
		}{
			{name: k.Kind, kind: k.Kind, want: k.New()},
			{name: k.Kind + "List", kind: k.Kind + "List", want: k.NewList()},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				gvk := servedgroup.SchemeGroupVersion.WithKind(tc.kind)
				got, err := s.New(gvk)
				if err != nil {
					t.Fatalf("New(%v): %v", gvk, err)
				}
				if reflect.TypeOf(got) != reflect.TypeOf(tc.want) {
					t.Errorf("New(%v) is a %T, want the source's %T", gvk, got, tc.want)
				}
				kinds, _, err := s.ObjectKinds(tc.want)
				if err != nil {
					t.Fatalf("ObjectKinds(%T): %v", tc.want, err)
				}
				if len(kinds) != 1 || kinds[0] != gvk {
					t.Errorf("ObjectKinds(%T) = %v, want only %v", tc.want, kinds, gvk)
				}
				if s.Recognizes(internal.WithKind(tc.kind)) {
					t.Errorf("%s is registered in %v: views have no internal version", tc.kind, internal)
				}
			})
		}
	}
}

func TestNewSchemeSourceTypeIsTheViewType(t *testing.T) {
	t.Parallel()
	s := servedgroup.NewScheme([]kinds.Kind{kinds.RoleBindings()})
	got, err := s.New(servedgroup.SchemeGroupVersion.WithKind("RoleBinding"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.(*rbacv1.RoleBinding); !ok {
		t.Errorf("RoleBinding view is a %T, want *rbacv1.RoleBinding", got)
	}
	if s.Recognizes(servedgroup.SchemeGroupVersion.WithKind("Role")) {
		t.Errorf("Role is registered although only RoleBindings were asked for")
	}
}

func TestNewSchemeNoInternalVersion(t *testing.T) {
	t.Parallel()
	s := servedgroup.NewScheme(kinds.BuiltIns())
	internal := schema.GroupVersion{Group: servedgroup.GroupName, Version: runtime.APIVersionInternal}
	// metav1.AddToGroupVersion registers the internal watch event of every
	// group it is given; nothing else may live in the internal version.
	for gvk := range s.AllKnownTypes() {
		if gvk.GroupVersion() == internal && gvk.Kind != "WatchEvent" {
			t.Errorf("%v is registered: views have no internal version", gvk)
		}
	}
	if s.IsVersionRegistered(internal) {
		t.Errorf("IsVersionRegistered(%v) = true", internal)
	}
	if !s.IsVersionRegistered(servedgroup.SchemeGroupVersion) {
		t.Errorf("IsVersionRegistered(%v) = false", servedgroup.SchemeGroupVersion)
	}
}

func TestNewSchemeMetaV1Options(t *testing.T) {
	t.Parallel()
	s := servedgroup.NewScheme(kinds.BuiltIns())
	v1 := schema.GroupVersion{Version: "v1"}
	tests := []struct {
		name string
		obj  runtime.Object
	}{
		{name: "ListOptions", obj: &metav1.ListOptions{}},
		{name: "GetOptions", obj: &metav1.GetOptions{}},
		{name: "Status", obj: &metav1.Status{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !s.Recognizes(v1.WithKind(tc.name)) {
				t.Fatalf("%s is not known in v1", tc.name)
			}
			got, err := s.New(v1.WithKind(tc.name))
			if err != nil {
				t.Fatal(err)
			}
			if reflect.TypeOf(got) != reflect.TypeOf(tc.obj) {
				t.Errorf("New(v1 %s) is a %T, want %T", tc.name, got, tc.obj)
			}
		})
	}
}

func TestCodecsEncodeSourceAsView(t *testing.T) {
	t.Parallel()
	s := servedgroup.NewScheme(kinds.BuiltIns())
	codecs := servedgroup.NewCodecs(s)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	enc := codecs.EncoderForVersion(info.Serializer, servedgroup.SchemeGroupVersion)

	tests := []struct {
		name     string
		obj      runtime.Object
		wantKind string
	}{
		{
			name: "RoleBinding",
			obj: &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "viewers"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			},
			wantKind: "RoleBinding",
		},
		{
			name: "RoleBinding whose TypeMeta names the source",
			obj: &rbacv1.RoleBinding{
				TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "viewers"},
			},
			wantKind: "RoleBinding",
		},
		{
			name:     "RoleList",
			obj:      &rbacv1.RoleList{Items: []rbacv1.Role{{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}}},
			wantKind: "RoleList",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			raw, err := runtime.Encode(enc, tc.obj)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			var got metav1.TypeMeta
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("decoding %s: %v", raw, err)
			}
			want := metav1.TypeMeta{APIVersion: "implicit.dev/v1alpha1", Kind: tc.wantKind}
			if got != want {
				t.Errorf("encoded as %+v, want %+v", got, want)
			}
		})
	}
}
