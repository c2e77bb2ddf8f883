package registry_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

func TestExceptionEnds(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	for _, tt := range []struct {
		name  string
		state string
		ends  *metav1.Time
		want  string
	}{
		{"no end", v1alpha1.ExceptionActive, nil, "-"},
		{"a week less an hour", v1alpha1.ExceptionActive, at(7*24*time.Hour - time.Hour), "6d23h"},
		{"past its end, not marked", v1alpha1.ExceptionActive, at(-time.Second), "ending"},
		{"marked", v1alpha1.ExceptionExpired, at(-time.Hour), "expired"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := &v1alpha1.Exception{Spec: v1alpha1.ExceptionSpec{ExpiresAt: tt.ends}, Status: v1alpha1.ExceptionStatus{State: tt.state}}
			if got := e.TimeLeft(now); got != tt.want {
				t.Errorf("Ends = %q, want %q", got, tt.want)
			}
		})
	}
}

// fakeExceptions declares "ci" on org and "ci" and "db" on team-a (org's
// child).
type fakeExceptions struct{}

func (fakeExceptions) Exceptions(ns string) ([]v1alpha1.Exception, error) {
	e := func(ns, name string) v1alpha1.Exception {
		return v1alpha1.Exception{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Status: v1alpha1.ExceptionStatus{State: v1alpha1.ExceptionActive}}
	}
	switch ns {
	case "org":
		return []v1alpha1.Exception{e("org", "ci")}, nil
	case "team-a", "":
		return []v1alpha1.Exception{e("org", "ci"), e("team-a", "ci"), e("team-a", "db")}, nil
	}
	return nil, nil
}

// TestExceptionStorage: a namespace's list holds its ancestors' too, a
// field selector picks by namespace and name; get finds only the
// namespace's own; the table has a row per exception.
func TestExceptionStorage(t *testing.T) {
	t.Parallel()
	s := registry.NewExceptionStorage(fakeExceptions{})
	in := func(ns string) context.Context { return genericapirequest.WithNamespace(context.Background(), ns) }
	names := func(obj runtime.Object) []string {
		var out []string
		for _, e := range obj.(*v1alpha1.ExceptionList).Items {
			out = append(out, e.Namespace+"/"+e.Name)
		}
		return out
	}
	obj, err := s.List(in("team-a"), &metainternalversion.ListOptions{})
	if err != nil || !reflect.DeepEqual(names(obj), []string{"org/ci", "team-a/ci", "team-a/db"}) {
		t.Errorf("list team-a: %v %v", names(obj), err)
	}
	sel := fields.OneTermEqualSelector("metadata.namespace", "org")
	if obj, err = s.List(in("team-a"), &metainternalversion.ListOptions{FieldSelector: sel}); err != nil || !reflect.DeepEqual(names(obj), []string{"org/ci"}) {
		t.Errorf("list team-a, namespace org: %v %v", names(obj), err)
	}
	got, err := s.Get(in("team-a"), "ci", nil)
	if err != nil || got.(*v1alpha1.Exception).Namespace != "team-a" {
		t.Errorf("get team-a/ci: %+v %v", got, err)
	}
	if _, err := s.Get(in("team-b"), "ci", nil); !apierrors.IsNotFound(err) {
		t.Errorf("get team-b/ci: %v, want NotFound", err)
	}
	table, err := s.ConvertToTable(context.Background(), obj, &metav1.TableOptions{})
	if err != nil || len(table.Rows) != 1 || table.Rows[0].Cells[0] != "org" || table.Rows[0].Cells[3] != v1alpha1.ExceptionActive {
		t.Errorf("table: %+v %v", table, err)
	}
}
