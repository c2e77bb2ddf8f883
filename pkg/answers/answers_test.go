package answers_test

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	tf "github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/answers"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// questionsWorld is the hierarchy (tf.Hierarchy) with:
//
//	implicit-global  g-lock (tf.Locked), g-open
//	org              g-open (shadows the global one), o-x
//	team-a           excludes rolebindings/o-x
//	team-a-1         g-lock (blocked by the lock)
//	c1 <-> c2        a parent cycle
func questionsWorld() []tf.Step {
	return append(tf.Hierarchy(),
		tf.AddNamespace(tf.Namespace("team-a", tf.Parent("org"), tf.Exclude("rolebindings/o-x"))),
		tf.AddNamespace(tf.Namespace("c1", tf.Parent("c2"))),
		tf.AddNamespace(tf.Namespace("c2", tf.Parent("c1"))),
		putRB(global, "g-lock", tf.Locked),
		putRB(global, "g-open"),
		putRB("org", "g-open"),
		putRB("org", "o-x"),
		putRB("team-a-1", "g-lock"),
	)
}

func TestQuestionHierarchy(t *testing.T) {
	t.Parallel()
	m := answersOf(t, true, questionsWorld())
	for _, tc := range []struct {
		namespace string
		want      v1alpha1.HierarchyStatus
		exists    bool
	}{
		{"org", v1alpha1.HierarchyStatus{Tenant: true, Children: []string{"team-a", "team-b"}}, true},
		{"team-a", v1alpha1.HierarchyStatus{Tenant: true, Parent: "org", Ancestors: []string{"org"}, Children: []string{"team-a-1"}}, true},
		{"team-a-1", v1alpha1.HierarchyStatus{Tenant: true, Parent: "team-a", Ancestors: []string{"team-a", "org"}}, true},
		{"kube-system", v1alpha1.HierarchyStatus{NotTenant: v1alpha1.NotTenantExcluded}, true},
		{"c1", v1alpha1.HierarchyStatus{Tenant: true, Parent: "c2", Problems: []v1alpha1.HierarchyProblem{{
			Reason: "Cycle", Namespace: "c2", Parent: "c1", Cycle: []string{"c1", "c2"},
			Message: "namespaces c1 -> c2 form a parent cycle and inherit from no parent",
		}}}, true},
		{"nowhere", v1alpha1.HierarchyStatus{}, false},
	} {
		t.Run(tc.namespace, func(t *testing.T) {
			got, ok, err := m.Hierarchy(tc.namespace)
			if err != nil || ok != tc.exists {
				t.Fatalf("Hierarchy(%s): exists %v, %v; want %v", tc.namespace, ok, err, tc.exists)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Hierarchy(%s)\n got  %+v\n want %+v", tc.namespace, got, tc.want)
			}
		})
	}
	all, err := m.Hierarchies()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 10 || !reflect.DeepEqual(all["team-a"].Children, []string{"team-a-1"}) {
		t.Errorf("Hierarchies: %d namespaces, team-a %+v", len(all), all["team-a"])
	}
	if _, _, err := answersOf(t, false, questionsWorld()).Hierarchy("org"); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("before sync: %v, want not synced", err)
	}
}

func TestQuestionExplain(t *testing.T) {
	t.Parallel()
	m := answersOf(t, true, questionsWorld())
	type scope struct{ namespace, outcome, by string }
	for _, tc := range []struct {
		name, namespace, item string
		inView                bool
		winner                string
		scopes                []scope
	}{
		{
			name: "a lock blocks the local shadow", namespace: "team-a-1", item: "g-lock", inView: true, winner: global,
			scopes: []scope{{global, "Won", ""}, {"org", "NoItem", ""}, {"team-a", "NoItem", ""}, {"team-a-1", "BlockedByLock", global}},
		},
		{
			name: "the parent shadows the global item", namespace: "team-b", item: "g-open", inView: true, winner: "org",
			scopes: []scope{{global, "Shadowed", "org"}, {"org", "Won", ""}, {"team-b", "NoItem", ""}},
		},
		{
			name: "an exclusion removes the parent's item, below too", namespace: "team-a-1", item: "o-x",
			scopes: []scope{{global, "NoItem", ""}, {"org", "Excluded", "team-a"}, {"team-a", "NoItem", ""}, {"team-a-1", "NoItem", ""}},
		},
		{
			name: "a name no scope holds", namespace: "team-b", item: "absent",
			scopes: []scope{{global, "NoItem", ""}, {"org", "NoItem", ""}, {"team-b", "NoItem", ""}},
		},
		{
			name: "a non-tenant has its local scope only", namespace: "kube-system", item: "g-open",
			scopes: []scope{{"kube-system", "NoItem", ""}},
		},
		{
			name: "a namespace in a cycle inherits the global scope only", namespace: "c1", item: "g-open", inView: true, winner: global,
			scopes: []scope{{global, "Won", ""}, {"c1", "NoItem", ""}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := m.Explain(rbResource, tc.namespace, tc.item)
			if err != nil {
				t.Fatal(err)
			}
			var scopes []scope
			for _, s := range got.Scopes {
				scopes = append(scopes, scope{s.Namespace, s.Outcome, s.By})
			}
			if got.InView != tc.inView || !reflect.DeepEqual(scopes, tc.scopes) {
				t.Errorf("in view %v, scopes %v; want %v, %v", got.InView, scopes, tc.inView, tc.scopes)
			}
			if tc.inView && (got.Winner == nil || got.Winner.Namespace != tc.winner) {
				t.Errorf("winner %+v, want %s", got.Winner, tc.winner)
			}
			if got.Summary == "" {
				t.Error("no summary")
			}
			t.Log(got.Summary)
		})
	}
}

func TestQuestionPreview(t *testing.T) {
	t.Parallel()
	type change struct{ namespace, typ string }
	type unchanged struct{ namespace, reason, by string }
	for _, tc := range []struct {
		name            string
		namespace, item string
		obj             runtime.Object // nil: delete
		operation       string
		changed         []change
		unchanged       []unchanged
		reached         int
	}{
		{
			name: "updating a global item the parent shadows", namespace: global, item: "g-open",
			obj: tf.SourceRoleBinding(global, "g-open", func(m *metav1.ObjectMeta) { m.Labels["team"] = "new" }), operation: "Update", reached: 3, // c1, c2, solo: org shadows it for its subtree
			changed: []change{{"c1", "Modified"}, {"c2", "Modified"}, {global, "Modified"}, {"solo", "Modified"}},
			unchanged: []unchanged{{"org", "Shadowed", "org"}, {"team-a", "Shadowed", "org"}, {"team-a-1", "Shadowed", "org"},
				{"team-b", "Shadowed", "org"}},
		},
		{
			name: "the same content again changes nothing", namespace: "org", item: "g-open",
			obj: tf.SourceRoleBinding("org", "g-open"), operation: "Update", reached: 3, // its subtree still sees it, unchanged
		},
		{
			name: "deleting a parent's item an exclusion hides", namespace: "org", item: "o-x", operation: "Delete", reached: 1, // team-b: team-a excludes it for its subtree
			changed:   []change{{"org", "Deleted"}, {"team-b", "Deleted"}},
			unchanged: []unchanged{{"team-a", "Excluded", "team-a"}, {"team-a-1", "Excluded", "team-a"}},
		},
		{
			name: "creating a shadow of a locked item", namespace: "team-a", item: "g-lock",
			obj: tf.SourceRoleBinding("team-a", "g-lock"), operation: "Create", reached: 0, // the lock keeps team-a-1 on the global item
			unchanged: []unchanged{{"team-a", "Locked", global}, {"team-a-1", "Locked", global}},
		},
		{
			name: "creating a new item in a parent", namespace: "team-a", item: "new",
			obj: tf.SourceRoleBinding("team-a", "new"), operation: "Create", reached: 1, // team-a-1: never the source's own
			changed: []change{{"team-a", "Added"}, {"team-a-1", "Added"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mux := tf.Mirror(true, questionsWorld(), rbResource)
			m := answers.New(mux)
			before, _ := tf.Views(t, mux, rbResource)
			got, err := m.Preview(rbResource, tc.namespace, tc.item, tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			var changed []change
			for _, c := range got.Changed {
				changed = append(changed, change{c.Namespace, c.Type})
			}
			var kept []unchanged
			for _, u := range got.Unchanged {
				kept = append(kept, unchanged{u.Namespace, u.Reason, u.By})
			}
			if got.Operation != tc.operation || got.Reached != tc.reached || !reflect.DeepEqual(changed, tc.changed) || !reflect.DeepEqual(kept, tc.unchanged) {
				t.Errorf("got %s reaching %d, changed %v, unchanged %v\nwant %s reaching %d, changed %v, unchanged %v",
					got.Operation, got.Reached, changed, kept, tc.operation, tc.reached, tc.changed, tc.unchanged)
			}
			if after, _ := tf.Views(t, mux, rbResource); !reflect.DeepEqual(before, after) {
				t.Error("a preview changed the views")
			}
		})
	}
}

// TestServesBeforeSync: before the sources are read, a view is taken as
// served, so that the explanation answers 503 as for a served resource.
func TestServesBeforeSync(t *testing.T) {
	t.Parallel()
	unsynced := answersOf(t, false, questionsWorld())
	if !unsynced.Serves(rbResource) {
		t.Error("Serves before sync = false, want true")
	}
	if _, err := unsynced.Explain(rbResource, "org", "g-open"); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("Explain before sync: %v, want 503", err)
	}
	synced := answersOf(t, true, questionsWorld())
	if !synced.Serves(rbResource) || synced.Serves("networkpolicies") {
		t.Errorf("Serves once synced: rolebindings %v, networkpolicies %v; want true, false", synced.Serves(rbResource), synced.Serves("networkpolicies"))
	}
}

// TestQuestionExplainCandidate: a namespace whose stage a candidate selects
// is explained with the candidate standing in for the stable source (the
// view shows the candidate's version there); another keeps the stable one.
func TestQuestionExplainCandidate(t *testing.T) {
	t.Parallel()
	candidate := func(m *metav1.ObjectMeta) {
		m.Annotations[v1alpha1.AnnotationCandidateFor] = "g-open"
		m.Annotations[v1alpha1.AnnotationCanarySelector] = v1alpha1.LabelStage + "=canary"
	}
	canary := func(ns *corev1.Namespace) { ns.Labels[v1alpha1.LabelStage] = "canary" }
	m := answersOf(t, true, append(tf.Hierarchy(),
		tf.AddNamespace(tf.Namespace("team-a", tf.Parent("org"), canary)),
		putRB(global, "g-open"),
		putRB(global, "g-open.next", candidate),
	))
	for _, tc := range []struct {
		namespace, want string
	}{
		{"team-a", "in the version of its candidate g-open.next"},
		{"team-b", "is the view's item"},
	} {
		got, err := m.Explain(rbResource, tc.namespace, "g-open")
		if err != nil {
			t.Fatal(err)
		}
		if !got.InView || got.Winner == nil || got.Winner.Namespace != global {
			t.Fatalf("%s: in view %v, winner %+v; want the global g-open", tc.namespace, got.InView, got.Winner)
		}
		var won string
		for _, s := range got.Scopes {
			if s.Outcome == "Won" {
				won = s.Message
			}
		}
		if !strings.Contains(won, tc.want) || (tc.namespace == "team-b" && strings.Contains(won, "candidate")) {
			t.Errorf("%s: the winning scope says %q, want %q", tc.namespace, won, tc.want)
		}
		if inSummary := strings.Contains(got.Summary, "g-open.next"); inSummary != (tc.namespace == "team-a") {
			t.Errorf("%s: summary %q names the candidate: %v", tc.namespace, got.Summary, inSummary)
		}
		t.Logf("%s: %s", tc.namespace, got.Summary)
	}
}
