package registry_test

import (
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

// fakeAudits reports a fixed audit, and records what it was asked.
type fakeAudits struct {
	report           authz.AuditReport
	namespace, asked string
}

func (f *fakeAudits) CandidateAudits(namespace, stable string) (authz.AuditReport, error) {
	f.namespace, f.asked = namespace, stable
	return f.report, nil
}

// TestCandidateAuditStorage: a candidate audit answers this replica's
// records of the stable binding's candidates, saying whose view it is, to
// a requester who may list the namespace's RoleBindings, and only for
// RoleBindings.
func TestCandidateAuditStorage(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 11, 25, 17, 0, 0, 0, time.UTC)
	src := &fakeAudits{report: authz.AuditReport{Replica: "implicit-0", Started: since, Candidates: []authz.CandidateAudit{{
		Candidate: authz.CandidateRef{Namespace: "implicit-global", Name: "org-viewers.next", UID: "u1"}, Stable: "org-viewers",
		Since: since, Judged: 3, WouldDeny: 2, WouldAllow: 1,
		Keys:             []authz.AuditKey{{Namespace: "t1", User: "alice", Verb: "get", Resource: "pods", Direction: authz.WouldDeny, Count: 2}},
		Samples:          []authz.AuditSample{{Time: since, Namespace: "t1", User: "bob", Groups: []string{"h"}, Verb: "get", Resource: "pods", Direction: authz.WouldAllow}},
		OthersWouldAllow: 1,
	}}}}
	authorizer := &fakeAuthorizer{allow: map[string]bool{
		"root list rbac.authorization.k8s.io/rolebindings implicit-global/":     true,
		"root list rbac.authorization.k8s.io/rolebindings /":                    true,
		"ns-admin list rbac.authorization.k8s.io/rolebindings implicit-global/": true,
	}}
	s := registry.NewCandidateAuditStorage(src, authorizer, nil)

	obj, err := s.Create(asUser("root", "implicit-global"), &v1alpha1.CandidateAudit{Spec: v1alpha1.CandidateAuditSpec{Name: "org-viewers"}}, nil, &metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	got := obj.(*v1alpha1.CandidateAudit)
	if src.namespace != "implicit-global" || src.asked != "org-viewers" {
		t.Errorf("asked %s/%s, want implicit-global/org-viewers", src.namespace, src.asked)
	}
	if got.Spec.Resource != "rolebindings.rbac.authorization.k8s.io" || got.Status.Replica != "implicit-0" || !strings.Contains(got.Status.Scope, "replica implicit-0") {
		t.Errorf("status: %+v", got.Status)
	}
	if len(got.Status.Candidates) != 1 {
		t.Fatalf("candidates: %+v", got.Status.Candidates)
	}
	c := got.Status.Candidates[0]
	if c.Name != "org-viewers.next" || c.UID != "u1" || c.Since == nil || !c.Since.Time.Equal(since) || c.Judged != 3 || c.WouldDeny != 2 || c.WouldAllow != 1 ||
		len(c.Keys) != 1 || c.Keys[0].Direction != "WouldDeny" || c.Keys[0].Count != 2 || len(c.Samples) != 1 || c.Samples[0].User != "bob" || c.OthersWouldAllow != 1 {
		t.Errorf("candidate: %+v", c)
	}

	// An admin of the namespace alone gets the counts, not who did what where.
	obj, err = s.Create(asUser("ns-admin", "implicit-global"), &v1alpha1.CandidateAudit{Spec: v1alpha1.CandidateAuditSpec{Name: "org-viewers"}}, nil, &metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Create as ns-admin: %v", err)
	}
	if c := obj.(*v1alpha1.CandidateAudit).Status.Candidates[0]; c.WouldDeny != 2 || c.WouldAllow != 1 || len(c.Keys) != 0 || len(c.Samples) != 0 ||
		c.OthersWouldDeny != 2 || c.OthersWouldAllow != 1 || !strings.Contains(c.Withheld, "every namespace") {
		t.Errorf("ns-admin's answer: %+v, want the counts only, saying why", c)
	}
	if _, err := s.Create(asUser("sam", "implicit-global"), &v1alpha1.CandidateAudit{Spec: v1alpha1.CandidateAuditSpec{Name: "org-viewers"}}, nil, &metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a requester who may not list the RoleBindings: %v, want Forbidden", err)
	}
	if _, err := s.Create(asUser("root", "implicit-global"), &v1alpha1.CandidateAudit{Spec: v1alpha1.CandidateAuditSpec{Resource: "networkpolicies.networking.k8s.io", Name: "x"}}, nil, &metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Errorf("another resource: %v, want BadRequest", err)
	}
	if _, err := s.Create(asUser("root", "implicit-global"), &v1alpha1.CandidateAudit{}, nil, &metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Errorf("no name: %v, want BadRequest", err)
	}
}
