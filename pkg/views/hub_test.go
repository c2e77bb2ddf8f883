package views_test

import (
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
)

// TestHubProvenance: an item whose source comes from a hub cluster carries
// implicit.dev/source-cluster, and implicit.dev/source-stale-since while the
// hub is unreachable; other items carry neither, even when their source
// tries to spoof them.
func TestHubProvenance(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	spoofed := roleBinding("team-a", "local")
	spoofed.Annotations = map[string]string{v1alpha1.AnnotationSourceCluster: "evil", v1alpha1.AnnotationSourceStaleSince: "never"}

	tests := []struct {
		name        string
		result      merge.Result
		stale       bool
		wantCluster string
		wantSince   string
	}{
		{name: "hub item, hub reachable", result: merge.Result{Scope: merge.ScopeGlobal, Item: merge.Item{Namespace: global, Name: "g", Object: roleBinding(global, "g"), Cluster: "hub"}},
			wantCluster: "hub"},
		{name: "hub item, hub stale", stale: true, result: merge.Result{Scope: merge.ScopeGlobal, Item: merge.Item{Namespace: global, Name: "g", Object: roleBinding(global, "g"), Cluster: "hub"}},
			wantCluster: "hub", wantSince: "2026-11-21T10:00:00Z"},
		{name: "local item spoofing both, hub stale", stale: true, result: merge.Result{Scope: merge.ScopeLocal, Item: merge.Item{Namespace: "team-a", Name: "local", Object: spoofed}}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs := views.NewObjects(newObject(), 0).WithStaleness(func() (time.Time, bool) { return since, tc.stale })
			obj, err := objs.Item("rolebindings", "team-a", tc.result, strconv.Itoa(100+i))
			if err != nil {
				t.Fatal(err)
			}
			if c, ok := obj.(interface{ GetObject() runtime.Object }); ok {
				obj = c.GetObject()
			}
			acc, err := meta.Accessor(obj)
			if err != nil {
				t.Fatal(err)
			}
			ann := acc.GetAnnotations()
			if ann[v1alpha1.AnnotationSourceCluster] != tc.wantCluster {
				t.Errorf("source-cluster %q, want %q", ann[v1alpha1.AnnotationSourceCluster], tc.wantCluster)
			}
			if ann[v1alpha1.AnnotationSourceStaleSince] != tc.wantSince {
				t.Errorf("source-stale-since %q, want %q", ann[v1alpha1.AnnotationSourceStaleSince], tc.wantSince)
			}
		})
	}
}
