package whatif_test

import (
	"strings"
	"testing"

	tf "github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// TestInheritedItems: the items an exception of namespace would name are
// every item it inherits as if nothing in its lineage excluded anything
// (its own exclusions and exceptions, its ancestors'), under the labels it
// is being written with; never its own objects.
func TestInheritedItems(t *testing.T) {
	t.Parallel()
	m := muxOf(t, true, with(
		tf.AddNamespace(tf.Namespace("team-a", tf.Parent("org"), tf.Exclude("rolebindings/g1"))),
		putRB(global, "g1"), putRB("org", "p1"), putRB("team-a", "p2"), putRB("team-a-1", "own"),
	))
	excepting := map[string]string{
		v1alpha1.AnnotationExclude:    "rolebindings/p1",
		v1alpha1.AnnotationExceptions: `[{"name":"e","exclude":["rolebindings/p2"],"reason":"r","requestedBy":"u"}]`,
	}
	tests := []struct {
		name      string
		resource  string
		namespace string
		next      whatif.NamespaceMeta
		want      string
	}{
		{name: "excluded above and by itself", namespace: "team-a-1",
			next: whatif.NamespaceMeta{Labels: map[string]string{v1alpha1.LabelParent: "team-a"}, Annotations: excepting},
			want: "global implicit-global/g1, parent org/p1, parent team-a/p2"},
		{name: "under the parent it is being written with", namespace: "team-a-1",
			next: whatif.NamespaceMeta{Labels: map[string]string{v1alpha1.LabelParent: "org"}, Annotations: excepting},
			want: "global implicit-global/g1, parent org/p1"},
		{name: "a namespace being created", namespace: "new", next: whatif.NamespaceMeta{Annotations: excepting},
			want: "global implicit-global/g1"},
		{name: "a resource not served", resource: "networkpolicies", namespace: "team-a-1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resource := tc.resource
			if resource == "" {
				resource = rbResource
			}
			items, err := m.InheritedItems(resource, tc.namespace, tc.next)
			if err != nil {
				t.Fatal(err)
			}
			if got := describeResults(items); got != tc.want {
				t.Errorf("InheritedItems = %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := muxOf(t, false, with()).InheritedItems(rbResource, "org", whatif.NamespaceMeta{}); !watchmux.IsNotSynced(err) {
		t.Errorf("before sync: %v, want the not-synced error", err)
	}
}

func describeResults(rs []merge.Result) string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, string(r.Scope)+" "+r.Item.Namespace+"/"+r.Item.Name)
	}
	return strings.Join(out, ", ")
}
