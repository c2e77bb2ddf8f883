package answers_test

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tf "github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestQuestionPreviewCandidate: the edit of a candidate is previewed on the
// view item it stages, in the namespaces its selector picks: writing the
// live candidate back changes nothing; changing it modifies the canaries'
// item (with the content before and after); deleting it puts them back on
// the stable version. None of it shows as an item named after the candidate.
func TestQuestionPreviewCandidate(t *testing.T) {
	t.Parallel()
	candidate := func(m *metav1.ObjectMeta) {
		m.Annotations[v1alpha1.AnnotationCandidateFor] = "g-open"
		m.Annotations[v1alpha1.AnnotationCanarySelector] = v1alpha1.LabelStage + "=canary"
	}
	canary := func(ns *corev1.Namespace) { ns.Labels[v1alpha1.LabelStage] = "canary" }
	live := tf.SourceRoleBinding(global, "g-open.next", candidate)
	m := answersOf(t, true, append(tf.Hierarchy(),
		tf.AddNamespace(tf.Namespace("team-a", tf.Parent("org"), canary)),
		putRB(global, "g-open"),
		putRB(global, "g-open.next", candidate),
	))
	changed := live.DeepCopy()
	changed.Subjects = append(changed.Subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "auditors"})

	type change struct{ namespace, typ string }
	for _, tc := range []struct {
		name string
		obj  *rbacv1.RoleBinding // nil: delete
		want []change
	}{
		{"the live candidate again", live.DeepCopy(), nil},
		{"a changed candidate", changed, []change{{"team-a", "Modified"}}},
		{"deleting the candidate", nil, []change{{"team-a", "Modified"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st, err = m.Preview(rbResource, global, "g-open.next", nil)
			if tc.obj != nil {
				st, err = m.Preview(rbResource, global, "g-open.next", tc.obj)
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []change
			for _, c := range st.Changed {
				got = append(got, change{c.Namespace, c.Type})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("changed %v, want %v", got, tc.want)
			}
			for _, c := range st.Changed {
				if c.Before == nil || c.After == nil || c.Before.Content == nil || c.After.Content == nil {
					t.Fatalf("%s: no content before or after: %+v", c.Namespace, c)
				}
				var before, after rbacv1.RoleBinding
				if err := json.Unmarshal(c.Before.Content.Raw, &before); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(c.After.Content.Raw, &after); err != nil {
					t.Fatal(err)
				}
				wantBefore, wantAfter := len(live.Subjects), len(changed.Subjects)
				if tc.obj == nil {
					wantAfter = 1 // the stable g-open's one subject
				}
				if len(before.Subjects) != wantBefore || len(after.Subjects) != wantAfter {
					t.Errorf("%s: subjects before %v, after %v; want %d then %d", c.Namespace, before.Subjects, after.Subjects, wantBefore, wantAfter)
				}
			}
		})
	}
}
