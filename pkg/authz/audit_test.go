package authz_test

import (
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

// nobody is a canary selector that matches no namespace: an audit-only
// candidate.
const nobody = v1alpha1.LabelStage + " in (nobody)"

// auditWorld is a global binding that grants group g view, and a candidate
// that replaces g with h, selected by selector; tenants t1 and t2 with no
// stage, t3 a canary, and t4 with its own binding of the stable name.
func auditWorld(selector string) []runtime.Object {
	return []runtime.Object{
		namespace(global),
		namespace("t1"),
		namespace("t2"),
		namespace("t3", stage("canary")),
		namespace("t4"),
		roleBinding(global, "org-viewers", clusterRoleRef("view"), []rbacv1.Subject{group("g")}),
		roleBinding(global, "org-viewers.next", clusterRoleRef("view"), []rbacv1.Subject{group("h")},
			candidateFor("org-viewers", selector)),
		roleBinding(global, "org-editors", clusterRoleRef("edit"), []rbacv1.Subject{user("carol")}),
		roleBinding("t4", "org-viewers", clusterRoleRef("view"), []rbacv1.Subject{group("local")}),
	}
}

// audits returns the one audit of org-viewers' candidate.
func audits(t *testing.T, f *fixture) authz.CandidateAudit {
	t.Helper()
	rep, err := f.authz.CandidateAudits(global, "org-viewers")
	if err != nil {
		t.Fatalf("CandidateAudits: %v", err)
	}
	if len(rep.Candidates) != 1 {
		t.Fatalf("CandidateAudits: %d candidates, want 1: %+v", len(rep.Candidates), rep.Candidates)
	}
	return rep.Candidates[0]
}

func keyString(k authz.AuditKey) string {
	return fmt.Sprintf("%s %s %s %s %s=%d", k.Direction, k.Namespace, k.User, k.Verb, k.Resource, k.Count)
}

// TestAuditCandidate judges an audit-only candidate on the requests the
// webhook answers: the answers given stay the stable binding's; the
// differences are recorded with their namespace, subject, verb and
// resource, from the decision cache too, without reading the views again;
// a Warning Event is recorded for each new would-deny key, and the counter
// counts every difference. Not parallel: it reads the package's counter.
func TestAuditCandidate(t *testing.T) {
	f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, auditWorld(nobody)...)
	events := record.NewFakeRecorder(10)
	f.authz.SetEventRecorder(events)
	denyBefore, allowBefore := authz.Differences("would_deny"), authz.Differences("would_allow")

	alice := func(ns string) authz.Attributes { return podReader("alice", []string{"g", "system:authenticated"}, ns) }
	for _, step := range []struct {
		attrs authz.Attributes
		want  bool
	}{
		{alice("t1"), true},
		{alice("t1"), true}, // from the cache
		{with(alice("t2"), "list"), true},
		{podReader("bob", []string{"h"}, "t1"), false},
		{podReader("carol", []string{"g"}, "t2"), true}, // org-editors grants it either way: no difference
		{alice("t4"), false},                            // t4's own org-viewers: the candidate never shows there
	} {
		if got := f.authorize(t, step.attrs); got.Allowed != step.want {
			t.Fatalf("%+v: %+v, want allowed %v (the answer given never changes)", step.attrs, got, step.want)
		}
	}

	got := audits(t, f)
	if got.Problem != "" || got.Since.IsZero() {
		t.Errorf("audit: problem %q, since %v; want audited", got.Problem, got.Since)
	}
	if got.Judged != 5 || got.WouldDeny != 3 || got.WouldAllow != 1 {
		t.Errorf("audit: judged %d, would deny %d, would allow %d; want 5, 3, 1", got.Judged, got.WouldDeny, got.WouldAllow)
	}
	if n := f.authz.AuditDifferences(global, "org-viewers.next"); n != 4 {
		t.Errorf("AuditDifferences: %d, want 4 (3 would deny, 1 would allow)", n)
	}
	if n := f.authz.AuditDifferences(global, "org-viewers"); n != 0 {
		t.Errorf("AuditDifferences of the stable binding: %d, want 0", n)
	}
	var keys []string
	for _, k := range got.Keys {
		keys = append(keys, keyString(k))
	}
	want := []string{
		"WouldDeny t1 alice get pods=2",
		"WouldAllow t1 bob get pods=1",
		"WouldDeny t2 alice list pods=1",
	}
	if strings.Join(keys, "; ") != strings.Join(want, "; ") {
		t.Errorf("keys:\n%s\nwant:\n%s", strings.Join(keys, "\n"), strings.Join(want, "\n"))
	}
	if got.OthersWouldDeny != 0 || got.OthersWouldAllow != 0 {
		t.Errorf("others: %d, %d; want none", got.OthersWouldDeny, got.OthersWouldAllow)
	}
	if len(got.Samples) != 4 {
		t.Fatalf("samples: %+v, want 4", got.Samples)
	}
	s := got.Samples[3]
	if s.User != "bob" || s.Namespace != "t1" || s.Direction != authz.WouldAllow || s.Given != "" ||
		!strings.Contains(s.Candidate, `RoleBinding "org-viewers" (candidate org-viewers.next)`) || strings.Join(s.Groups, ",") != "h" {
		t.Errorf("last sample: %+v", s)
	}
	if s := got.Samples[0]; strings.Join(s.Groups, ",") != "g" || !strings.Contains(s.Given, `RoleBinding "org-viewers" inherited`) || s.Candidate != "" {
		t.Errorf("first sample: %+v, want groups summarized without system:authenticated and the reason given", s)
	}
	if d := authz.Differences("would_deny") - denyBefore; d != 3 {
		t.Errorf("would_deny counter: +%v, want +3", d)
	}
	if d := authz.Differences("would_allow") - allowBefore; d != 1 {
		t.Errorf("would_allow counter: +%v, want +1", d)
	}
	// One Event per new would-deny key: alice in t1, alice listing in t2.
	// Anyone who reads Events in the candidate's namespace reads them, so
	// they carry counts, the verb and resource, and where the rest is; who
	// and where stay behind the CandidateAudit's permission (issue 39).
	if n := len(events.Events); n != 2 {
		t.Fatalf("%d Events, want 2", n)
	}
	for _, want := range []string{"would deny get pods, allowed today; on this replica 1 of the 1 requests", "would deny list pods, allowed today; on this replica 3 of the 3 requests"} {
		e := <-events.Events
		if !strings.HasPrefix(e, "Warning "+authz.ReasonCandidateWouldDeny+" ") || !strings.Contains(e, want) ||
			!strings.Contains(e, "kubectl implicit rollout status rolebinding org-viewers -n "+global) {
			t.Errorf("Event %q, want a warning with %q and where to read more", e, want)
		}
		for _, secret := range []string{"alice", `"g"`, "groups", "t1", "t2"} {
			if strings.Contains(e, secret) {
				t.Errorf("Event %q names %s: only the CandidateAudit's readers may know it", e, secret)
			}
		}
	}

	// A cached decision is judged again from the cache: no read of the views.
	reads := f.views.reads.Load()
	f.authorize(t, alice("t1"))
	if r := f.views.reads.Load() - reads; r != 0 {
		t.Errorf("a cached decision read the views %d times, want 0", r)
	}
	if got := audits(t, f); got.Judged != 6 || got.WouldDeny != 4 {
		t.Errorf("after a cached decision: judged %d, would deny %d; want 6, 4", got.Judged, got.WouldDeny)
	}

	// Abort: the candidate's records are dropped, and one created again
	// under the same name (a new uid) starts from nothing.
	apply(f.mux, true, roleBinding(global, "org-viewers.next", clusterRoleRef("view"), nil))
	if rep, err := f.authz.CandidateAudits(global, "org-viewers"); err != nil || len(rep.Candidates) != 0 {
		t.Fatalf("after the abort: %+v, %v; want no candidate", rep, err)
	}
	if n := f.authz.AuditedCandidates(); n != 0 {
		t.Errorf("after the abort: %d candidates' records held, want 0", n)
	}
	f.authorize(t, alice("t1"))
	apply(f.mux, false, roleBinding(global, "org-viewers.next", clusterRoleRef("view"), []rbacv1.Subject{group("h")},
		candidateFor("org-viewers", nobody), func(m *metav1.ObjectMeta) { m.UID = types.UID("uid-again") }))
	if got := audits(t, f); got.Judged != 0 || got.WouldDeny != 0 || len(got.Samples) != 0 || got.Candidate.UID != "uid-again" {
		t.Errorf("a new candidate of the same name: %+v, want nothing recorded", got)
	}
	f.authorize(t, alice("t1"))
	if got := audits(t, f); got.Judged != 1 || got.WouldDeny != 1 {
		t.Errorf("a new candidate of the same name, after one request: judged %d, would deny %d; want 1, 1", got.Judged, got.WouldDeny)
	}
}

// TestAuditPrune drops the records of a candidate deleted while nobody
// asks for its report.
func TestAuditPrune(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, auditWorld(nobody)...)
	f.authorize(t, podReader("alice", []string{"g"}, "t1"))
	if n := f.authz.AuditedCandidates(); n != 1 {
		t.Fatalf("%d candidates' records held, want 1", n)
	}
	if err := f.authz.PruneAudit(); err != nil || f.authz.AuditedCandidates() != 1 {
		t.Fatalf("prune with the candidate open: %v, %d held; want it kept", err, f.authz.AuditedCandidates())
	}
	apply(f.mux, true, roleBinding(global, "org-viewers.next", clusterRoleRef("view"), nil))
	if err := f.authz.PruneAudit(); err != nil || f.authz.AuditedCandidates() != 0 {
		t.Fatalf("prune after the abort: %v, %d held; want none", err, f.authz.AuditedCandidates())
	}
}

// TestAuditCanaries judges a candidate outside its canaries only, and not
// at all once the namespace's stage is selected.
func TestAuditCanaries(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, auditWorld(v1alpha1.LabelStage+"=canary")...)
	f.authorize(t, podReader("alice", []string{"g"}, "t3")) // the canary
	f.authorize(t, podReader("alice", []string{"g"}, "t1"))
	if got := audits(t, f); got.Judged != 1 || got.WouldDeny != 1 || got.Keys[0].Namespace != "t1" {
		t.Errorf("audit: %+v, want t1 judged alone", got)
	}
	apply(f.mux, false, namespace("t1", stage("canary")))
	if got := f.authorize(t, podReader("alice", []string{"g"}, "t1")); got.Allowed {
		t.Fatalf("alice in t1, now a canary: %+v, want no opinion", got)
	}
	if got := audits(t, f); got.Judged != 1 {
		t.Errorf("after t1 became a canary: judged %d, want 1 (a canary is enforced, not audited)", got.Judged)
	}
}

// TestAuditBounded keeps AuditTopKeys keys and AuditSamples samples
// however many differences there are, and accounts for every difference in
// the keys or the others.
func TestAuditBounded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, auditWorld(nobody)...)
	const users = 3 * authz.AuditTopKeys
	// A heavy hitter among many single keys: it stays counted.
	for i := range users {
		f.authorize(t, podReader(fmt.Sprintf("u%03d", i), []string{"g"}, "t1"))
		f.authorize(t, podReader("heavy", []string{"g"}, "t2"))
	}
	got := audits(t, f)
	if got.WouldDeny != 2*users || len(got.Keys) != authz.AuditTopKeys || len(got.Samples) != authz.AuditSamples {
		t.Fatalf("would deny %d, %d keys, %d samples; want %d, %d, %d", got.WouldDeny, len(got.Keys), len(got.Samples), 2*users, authz.AuditTopKeys, authz.AuditSamples)
	}
	sum := got.OthersWouldDeny
	for _, k := range got.Keys {
		sum += k.Count
	}
	if sum != got.WouldDeny {
		t.Errorf("keys and others sum to %d, want %d", sum, got.WouldDeny)
	}
	if k := got.Keys[0]; k.User != "heavy" || k.Count != users {
		t.Errorf("top key %s, want heavy with %d", keyString(k), users)
	}
	if last := got.Samples[len(got.Samples)-1]; last.User != "heavy" {
		t.Errorf("last sample %+v, want the latest request's", last)
	}
	if prev := got.Samples[len(got.Samples)-2]; prev.User != fmt.Sprintf("u%03d", users-1) {
		t.Errorf("sample before the last %+v, want u%03d's", prev, users-1)
	}
}

// TestAuditNotAudited reports a malformed candidate, and two candidates for
// one name, without judging them.
func TestAuditNotAudited(t *testing.T) {
	t.Parallel()
	objs := append(auditWorld(nobody), roleBinding(global, "org-viewers.other", clusterRoleRef("view"), []rbacv1.Subject{group("h")},
		candidateFor("org-viewers", nobody)))
	f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, objs...)
	f.authorize(t, podReader("alice", []string{"g"}, "t1"))
	rep, err := f.authz.CandidateAudits(global, "org-viewers")
	if err != nil || len(rep.Candidates) != 2 {
		t.Fatalf("CandidateAudits: %+v, %v; want two candidates", rep, err)
	}
	for _, c := range rep.Candidates {
		if !strings.Contains(c.Problem, "none applies") || c.Judged != 0 {
			t.Errorf("%s: problem %q, judged %d; want none applies, nothing judged", c.Candidate.Name, c.Problem, c.Judged)
		}
	}

	g := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, append(auditWorld(nobody)[:5],
		roleBinding(global, "org-viewers", clusterRoleRef("view"), []rbacv1.Subject{group("g")}),
		roleBinding(global, "org-viewers.next", clusterRoleRef("view"), []rbacv1.Subject{group("h")}, candidateFor("org-viewers", "team=a")))...)
	g.authorize(t, podReader("alice", []string{"g"}, "t1"))
	if got := audits(t, g); !strings.Contains(got.Problem, "malformed") || got.Judged != 0 {
		t.Errorf("a malformed candidate: problem %q, judged %d; want malformed, nothing judged", got.Problem, got.Judged)
	}
}

// TestAuditBind judges kube-apiserver's bind check too: alice may bind
// view in t1 because her inherited rules cover it; without g, the
// candidate would not let her.
func TestAuditBind(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, auditWorld(nobody)...)
	bind := authz.Attributes{User: "alice", Groups: []string{"g"}, Namespace: "t1", Verb: "bind",
		APIGroup: rbacv1.GroupName, Resource: "clusterroles", Name: "view"}
	if got := f.authorize(t, bind); !got.Allowed {
		t.Fatalf("bind view in t1: %+v, want allowed", got)
	}
	got := audits(t, f)
	if got.Judged != 1 || got.WouldDeny != 1 || len(got.Keys) != 1 || got.Keys[0].Verb != "bind" || got.Keys[0].Resource != "clusterroles.rbac.authorization.k8s.io" {
		t.Errorf("audit: %+v, want the bind judged and would-deny", got)
	}
}
