package whatif_test

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	tf "github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// atStage labels a test namespace with implicit.dev/stage.
func atStage(stage string) tf.NamespaceOpt {
	return func(n *corev1.Namespace) {
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[v1alpha1.LabelStage] = stage
	}
}

// stagedWorld is the hierarchy with team-a and team-a-1 at the canary
// stage and team-b at prod.
func stagedWorld(more ...tf.Step) []tf.Step {
	return with(append([]tf.Step{
		tf.AddNamespace(tf.Namespace("team-a", tf.Parent("org"), atStage("canary"))),
		tf.AddNamespace(tf.Namespace("team-a-1", tf.Parent("team-a"), atStage("canary"))),
		tf.AddNamespace(tf.Namespace("team-b", tf.Parent("org"), atStage("prod"))),
	}, more...)...)
}

// stagedCandidate is a RoleBinding candidate for stable, as a request sends it.
func stagedCandidate(t *testing.T, namespace, name, stable, selector string, opts ...tf.ObjectOpt) (*unstructured.Unstructured, *merge.Candidate) {
	t.Helper()
	opts = append([]tf.ObjectOpt{func(m *metav1.ObjectMeta) {
		m.Annotations[v1alpha1.AnnotationCandidateFor] = stable
		m.Annotations[v1alpha1.AnnotationCanarySelector] = selector
	}}, opts...)
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tf.SourceRoleBinding(namespace, name, opts...))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: content}
	c, err := merge.ParseCandidate(name, u.GetAnnotations())
	if err != nil {
		t.Fatal(err)
	}
	return u, c
}

func TestCandidateReach(t *testing.T) {
	t.Parallel()
	const canary = v1alpha1.LabelStage + "=canary"
	tests := []struct {
		name                string
		steps               []tf.Step
		namespace, selector string
		candidateOpts       []tf.ObjectOpt
		wantN, wantM        int
	}{
		// The tenants org, team-a, team-b, team-a-1 and solo inherit from
		// the global namespace; legacy and kube-system don't.
		{name: "global, stable exists", steps: stagedWorld(putRB(global, "org-viewers")), namespace: global, selector: canary, wantN: 2, wantM: 5},
		{name: "global, staged creation", steps: stagedWorld(), namespace: global, selector: canary, wantN: 2, wantM: 5},
		{name: "a local shadow keeps a namespace on its own", steps: stagedWorld(putRB(global, "org-viewers"), putRB("team-b", "org-viewers")),
			namespace: global, selector: canary, wantN: 2, wantM: 4},
		// team-a-1 inherits team-a's source, the nearer one.
		{name: "a parent's shadow keeps its subtree on it", steps: stagedWorld(putRB(global, "org-viewers"), putRB("team-a", "org-viewers")),
			namespace: global, selector: canary, wantN: 0, wantM: 3},
		{name: "a locked stable source can't be shadowed, nor its candidate", steps: stagedWorld(putRB(global, "org-viewers", tf.Locked), putRB("team-a", "org-viewers")),
			namespace: global, selector: canary, wantN: 2, wantM: 5},
		{name: "a locked candidate can't be shadowed", steps: stagedWorld(putRB("team-a", "org-viewers")),
			namespace: global, selector: canary, candidateOpts: []tf.ObjectOpt{tf.Locked}, wantN: 2, wantM: 5},
		{name: "negative selector reaches namespaces without a stage", steps: stagedWorld(), namespace: global,
			selector: v1alpha1.LabelStage + " notin (prod)", wantN: 4, wantM: 5},
		{name: "a parent's candidate stays in its subtree", steps: stagedWorld(putRB("org", "org-viewers")), namespace: "org", selector: canary, wantN: 2, wantM: 3},
		{name: "a leaf's candidate reaches no one", steps: stagedWorld(), namespace: "team-a-1", selector: canary, wantN: 0, wantM: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := muxOf(t, true, tt.steps)
			obj, c := stagedCandidate(t, tt.namespace, "org-viewers.next", "org-viewers", tt.selector, tt.candidateOpts...)
			n, of, err := m.CandidateReach(rbResource, tt.namespace, obj, c)
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.wantN || of != tt.wantM {
				t.Errorf("reaches %d of %d, want %d of %d", n, of, tt.wantN, tt.wantM)
			}
		})
	}
	t.Run("not synced", func(t *testing.T) {
		t.Parallel()
		m := muxOf(t, false, stagedWorld())
		obj, c := stagedCandidate(t, global, "x.next", "x", canary)
		if _, _, err := m.CandidateReach(rbResource, global, obj, c); err == nil {
			t.Error("no error before the mirror is synced")
		}
	})
}

func TestIndexCandidates(t *testing.T) {
	t.Parallel()
	cand := func(stable string) tf.ObjectOpt {
		return func(m *metav1.ObjectMeta) {
			m.Annotations[v1alpha1.AnnotationCandidateFor] = stable
			m.Annotations[v1alpha1.AnnotationCanarySelector] = v1alpha1.LabelStage + "=canary"
		}
	}
	malformed := func(m *metav1.ObjectMeta) { m.Annotations[v1alpha1.AnnotationCanarySelector] = "team=a" }
	m := muxOf(t, true, stagedWorld(
		putRB(global, "a"), putRB(global, "a.next", cand("a")), putRB(global, "a.v2", cand("a")),
		putRB(global, "bad", malformed), putRB(global, "b.next", cand("b")),
		putRB("org", "a.next", cand("a")),
		// A source of team-a blocked by a lock above is still one of team-a's.
		putRB(global, "locked", tf.Locked), putRB("team-a", "locked", cand("z")),
	))
	tests := []struct {
		namespace string
		want      []whatif.CandidateSource
	}{
		{global, []whatif.CandidateSource{{Name: "a.next", For: "a"}, {Name: "a.v2", For: "a"}, {Name: "b.next", For: "b"}, {Name: "bad", For: ""}}},
		{"org", []whatif.CandidateSource{{Name: "a.next", For: "a"}}},
		{"team-a", []whatif.CandidateSource{{Name: "locked", For: "z"}}},
		{"team-b", nil},
	}
	for _, tt := range tests {
		got, err := m.Candidates(rbResource, tt.namespace)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Candidates(%s) = %+v, want %+v", tt.namespace, got, tt.want)
		}
	}
	if _, err := muxOf(t, false, stagedWorld()).Candidates(rbResource, global); err == nil {
		t.Error("no error before the mirror is synced")
	}
}
