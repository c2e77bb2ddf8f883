package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// TestRolloutStatusAudit: rollout status of a RoleBinding with a candidate
// asks for its CandidateAudit, and prints the AUDIT section: whose view it
// is, since when, the counts, the top subjects and namespaces, the latest
// differences; without a candidate it asks nothing.
func TestRolloutStatusAudit(t *testing.T) {
	t.Parallel()
	since := metav1.NewTime(time.Date(2026, 11, 25, 17, 0, 0, 0, time.UTC))
	answer := v1alpha1.CandidateAuditStatus{
		Replica: "implicit-0", ReplicaStartTime: since, Scope: "the requests replica implicit-0 answered since 2026-11-25T17:00:00Z; each replica records its own share",
		Candidates: []v1alpha1.CandidateAuditRecord{{
			Name: "org-viewers.next", UID: "cand-uid", Since: &since, Judged: 5, WouldDeny: 3, WouldAllow: 1,
			Keys: []v1alpha1.AuditKeyCount{
				{Namespace: "t1", User: "alice", Verb: "get", Resource: "pods", Direction: "WouldDeny", Count: 2},
				{Namespace: "t2", User: "alice", Verb: "list", Resource: "pods", Direction: "WouldDeny", Count: 1},
				{Namespace: "t1", User: "bob", Verb: "get", Resource: "pods", Direction: "WouldAllow", Count: 1},
			},
			Samples: []v1alpha1.AuditSample{{Time: since, Namespace: "t1", User: "bob", Groups: []string{"h"}, Verb: "get", Resource: "pods", Name: "web", Direction: "WouldAllow"}},
		}},
	}
	stable := binding("org-viewers", "stable-uid", "7", nil, "view", "g")
	cand := binding("org-viewers.next", "cand-uid", "8", candidateAnnotations("org-viewers"), "view", "h")
	for _, tc := range []struct {
		name      string
		objs      []runtime.Object
		wantAsked bool
		wantLines []string
	}{
		{name: "a candidate", objs: []runtime.Object{stable, cand}, wantAsked: true, wantLines: []string{
			"AUDIT (replica implicit-0's view only: the requests replica implicit-0 answered since 2026-11-25T17:00:00Z; each replica records its own share)",
			"Candidate org-viewers.next, audited since 2026-11-25T17:00:00Z: 5 request(s) judged, 3 would be denied, 1 newly allowed.",
			"TOP SUBJECTS   WOULD DENY   WOULD ALLOW",
			"alice          3            0",
			"bob            0            1",
			"TOP NAMESPACES   WOULD DENY   WOULD ALLOW",
			"t1               2            1",
			"t2               1            0",
			"2026-11-25T17:00:00Z   t1          bob    h        get    pods       web    WouldAllow",
		}},
		{name: "no candidate", objs: []runtime.Object{stable}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dyn := newFake(t, tc.objs...)
			var asked *unstructured.Unstructured
			dyn.PrependReactor("create", "candidateaudits", func(a clienttesting.Action) (bool, runtime.Object, error) {
				asked = a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured)
				out := asked.DeepCopy()
				st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&answer)
				if err != nil {
					return true, nil, err
				}
				out.Object["status"] = st
				return true, out, nil
			})
			r := rbRollout(dyn, "org-viewers")
			st, err := r.status(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			r.audit(context.Background(), st)
			if (asked != nil) != tc.wantAsked {
				t.Fatalf("asked for a CandidateAudit: %v, want %v", asked != nil, tc.wantAsked)
			}
			if !tc.wantAsked {
				if st.Audit != nil {
					t.Errorf("audit %+v, want none", st.Audit)
				}
				return
			}
			if name, _, _ := unstructured.NestedString(asked.Object, "spec", "name"); name != "org-viewers" || asked.GetNamespace() != "" && asked.GetNamespace() != globalNS {
				t.Errorf("asked %v", asked.Object)
			}
			if c := st.Audit.Candidates[0]; len(c.TopSubjects) != 2 || c.TopSubjects[0] != (AuditTotal{Name: "alice", WouldDeny: 3}) {
				t.Errorf("top subjects %+v", c.TopSubjects)
			}
			var out bytes.Buffer
			if err := printRolloutStatus(&out, st); err != nil {
				t.Fatal(err)
			}
			for _, line := range tc.wantLines {
				if !strings.Contains(out.String(), line) {
					t.Errorf("output lacks %q:\n%s", line, out.String())
				}
			}
		})
	}
}
