package registry_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

func TestHierarchyStorage(t *testing.T) {
	t.Parallel()
	src := &fakeQuestions{hierarchies: map[string]v1alpha1.HierarchyStatus{
		"org":  {Tenant: true, Children: []string{"team"}},
		"team": {Tenant: true, Parent: "org", Ancestors: []string{"org"}},
	}}
	s := registry.NewHierarchyStorage(src)
	for _, tc := range []struct {
		name, namespace, get string
		wantErr              func(error) bool
	}{
		{name: "its own namespace's", namespace: "team", get: "team"},
		{name: "another name is not found", namespace: "team", get: "org", wantErr: apierrors.IsNotFound},
		{name: "a namespace that does not exist", namespace: "gone", get: "gone", wantErr: apierrors.IsNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := s.Get(asUser("u", tc.namespace), tc.get, &metav1.GetOptions{})
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("err %v", err)
				}
				return
			}
			h := obj.(*v1alpha1.Hierarchy)
			if err != nil || h.Name != tc.namespace || h.Namespace != tc.namespace || !reflect.DeepEqual(h.Status, src.hierarchies[tc.namespace]) {
				t.Fatalf("got %+v, %v", h, err)
			}
		})
	}
	all, err := s.List(asUser("u", ""), &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, h := range all.(*v1alpha1.HierarchyList).Items {
		names = append(names, h.Name)
	}
	if !slices.Equal(names, []string{"org", "team"}) {
		t.Errorf("list -A: %v", names)
	}
	one, _ := s.List(asUser("u", "team"), &metainternalversion.ListOptions{})
	if l := one.(*v1alpha1.HierarchyList); len(l.Items) != 1 || l.Items[0].Name != "team" {
		t.Errorf("list in team: %+v", l.Items)
	}
	table, err := s.ConvertToTable(context.Background(), all, nil)
	if err != nil || len(table.Rows) != 2 || !reflect.DeepEqual(table.Rows[1].Cells, []any{"team", "true", "org", "org", "<none>", "<none>"}) {
		t.Errorf("table %+v, %v", table, err)
	}
}
