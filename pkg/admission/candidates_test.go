package admission_test

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// candidateFor makes a test object a candidate for stable, seen where
// selector matches.
func candidateFor(stable, selector string) objOpt {
	return func(m *metav1.ObjectMeta) {
		m.Annotations[v1alpha1.AnnotationCandidateFor] = stable
		m.Annotations[v1alpha1.AnnotationCanarySelector] = selector
	}
}

// boundTo binds rb to the ClusterRole role instead.
func boundTo(rb *rbacv1.RoleBinding, role string) *rbacv1.RoleBinding {
	rb.RoleRef.Name = role
	return rb
}

func TestCandidates(t *testing.T) {
	t.Parallel()
	c, u, d := admissionv1.Create, admissionv1.Update, admissionv1.Delete
	const canary = v1alpha1.LabelStage + "=canary"
	next := func(opts ...objOpt) *rbacv1.RoleBinding {
		return roleBinding(global, "org-viewers.next", append([]objOpt{candidateFor("org-viewers", canary)}, opts...)...)
	}
	req := func(op admissionv1.Operation, old, obj runtime.Object) *admissionv1.AdmissionRequest {
		return request(op, rolebindings, global, "org-viewers.next", old, obj)
	}
	reaching := func(n, m int) *fakeIndex { return &fakeIndex{candidateReach: [2]int{n, m}} }
	lockedStable := func() *fakeIndex {
		return &fakeIndex{locked: map[string]bool{"rolebindings " + global + " org-viewers": true}, candidateReach: [2]int{2, 5}}
	}
	stableUnlock := unlock(rolebindings, global, "org-viewers")
	withStable := func(rb *rbacv1.RoleBinding) *fakeIndex {
		return &fakeIndex{objects: map[string]runtime.Object{"rolebindings " + global + " org-viewers": rb}, candidateReach: [2]int{2, 5}}
	}
	tests := []guardCase{
		{name: "ordinary source", req: request(c, rolebindings, global, "org-viewers", nil, roleBinding(global, "org-viewers")), wantAllowed: true},
		{name: "create warns of its reach", index: reaching(2, 5), req: req(c, nil, next()), wantAllowed: true,
			wantWarnings: []string{"implicit.dev: this candidate reaches 2 of 5 namespaces"}},
		{name: "update warns of its reach", index: reaching(0, 3), req: req(u, next(), next()), wantAllowed: true,
			wantWarnings: []string{admission.CandidateWarning(0, 3)}},
		{name: "delete warns of who goes back", index: reaching(2, 5), req: req(d, next(), nil), wantAllowed: true,
			wantWarnings: []string{admission.CandidateDeletedWarning(2, 5)}},
		{name: "reach error: no warning", index: &fakeIndex{reachErr: errBoom}, req: req(c, nil, next()), wantAllowed: true},

		// 1. Malformed candidates, with ParseCandidate's message.
		{name: "selector on another key", req: req(c, nil, roleBinding(global, "org-viewers.next", candidateFor("org-viewers", "team=a"))),
			wantMessage: []string{"malformed candidate", `selects on "team"`, v1alpha1.LabelStage}},
		{name: "empty selector", req: req(c, nil, roleBinding(global, "org-viewers.next", candidateFor("org-viewers", ""))),
			wantMessage: []string{"malformed candidate", v1alpha1.AnnotationCanarySelector + " is empty"}},
		{name: "missing candidate-for", req: req(c, nil, roleBinding(global, "org-viewers.next", annotated(v1alpha1.AnnotationCanarySelector, canary))),
			wantMessage: []string{"malformed candidate", v1alpha1.AnnotationCandidateFor + " must name the source"}},
		{name: "update to a malformed candidate", req: req(u, next(), roleBinding(global, "org-viewers.next", candidateFor("org-viewers", "env=prod"))),
			wantMessage: []string{`selects on "env"`}},
		{name: "deleting a malformed candidate", req: req(d, roleBinding(global, "org-viewers.next", candidateFor("org-viewers", "env=prod")), nil),
			wantAllowed: true, wantWarnings: []string{admission.CandidateDeletedWarning(0, 0)}},
		{name: "an object that stops being a candidate", req: req(u, next(), roleBinding(global, "org-viewers.next")), wantAllowed: true},

		// 2. A second candidate for the same stable name.
		{name: "second candidate", index: &fakeIndex{candidates: map[string][]whatif.CandidateSource{
			"rolebindings " + global: {{Name: "org-viewers.v2", For: "org-viewers"}, {Name: "other.next", For: "other"}},
		}}, req: req(c, nil, next()), wantMessage: []string{`already has the candidate "org-viewers.v2"`, "at most one candidate"}},
		{name: "the candidate itself is no second one", index: &fakeIndex{candidateReach: [2]int{1, 1}, candidates: map[string][]whatif.CandidateSource{
			"rolebindings " + global: {{Name: "org-viewers.next", For: "org-viewers"}, {Name: "other.next", For: "other"}},
		}}, req: req(u, next(), next()), wantAllowed: true, wantWarnings: []string{admission.CandidateWarning(1, 1)}},
		{name: "retargeting onto a staged name", index: &fakeIndex{candidates: map[string][]whatif.CandidateSource{
			"rolebindings " + global: {{Name: "org-viewers.next", For: "org-viewers"}, {Name: "other.next", For: "other"}},
		}}, req: request(u, rolebindings, global, "x", roleBinding(global, "x", candidateFor("y", canary)), roleBinding(global, "x", candidateFor("other", canary))),
			wantMessage: []string{`already has the candidate "other.next"`}},
		{name: "candidates can't be listed", index: &fakeIndex{candidatesErr: errBoom}, req: req(c, nil, next()), wantStatus: 503},

		// 3. Immutable fields of the stable source.
		{name: "roleRef changed", index: withStable(roleBinding(global, "org-viewers")), req: req(c, nil, boundTo(next(), "admin")),
			wantMessage: []string{"changes roleRef, which is immutable", `"org-viewers"`, "new name"}},
		{name: "roleRef kept", index: withStable(roleBinding(global, "org-viewers")), req: req(c, nil, next()),
			wantAllowed: true, wantWarnings: []string{admission.CandidateWarning(2, 5)}},
		{name: "staged creation: any roleRef", index: reaching(0, 5), req: req(c, nil, boundTo(next(), "admin")),
			wantAllowed: true, wantWarnings: []string{admission.CandidateWarning(0, 5)}},
		{name: "no immutable fields on roles", index: &fakeIndex{objects: map[string]runtime.Object{"roles " + global + " r": role(global, "r")}},
			req:         request(c, roles, global, "r.next", nil, role(global, "r.next", candidateFor("r", canary))),
			wantAllowed: true, wantWarnings: []string{admission.CandidateWarning(0, 0)}},

		// 4. Candidates of a locked source need unlock on it.
		{name: "create for a locked source without unlock", index: lockedStable(), req: req(c, nil, next()),
			wantMessage: []string{`candidate for rolebindings.rbac.authorization.k8s.io "org-viewers", which is locked`, "creating a candidate of a locked source", `"unlock"`},
			wantSAR:     []authorizationv1.ResourceAttributes{stableUnlock}},
		{name: "create for a locked source with unlock", index: lockedStable(), answers: map[authorizationv1.ResourceAttributes]answer{stableUnlock: {allowed: true}},
			req: req(c, nil, next()), wantAllowed: true, wantWarnings: []string{admission.CandidateWarning(2, 5)}, wantSAR: []authorizationv1.ResourceAttributes{stableUnlock}},
		{name: "update for a locked source", index: lockedStable(), req: req(u, next(), next()),
			wantMessage: []string{"changing a candidate"}, wantSAR: []authorizationv1.ResourceAttributes{stableUnlock}},
		{name: "abort for a locked source", index: lockedStable(), req: req(d, next(), nil),
			wantMessage: []string{"deleting a candidate"}, wantSAR: []authorizationv1.ResourceAttributes{stableUnlock}},
		{name: "abort in a terminating namespace", index: &fakeIndex{locked: lockedStable().locked, terminating: map[string]bool{global: true}}, hostTerminating: []string{global},
			req: req(d, next(), nil), wantAllowed: true, wantWarnings: []string{admission.CandidateDeletedWarning(0, 0)}},
		{name: "abort in a namespace kube-apiserver alone shows terminating", index: lockedStable(), hostTerminating: []string{global},
			req: req(d, next(), nil), wantAllowed: true, wantWarnings: []string{admission.CandidateDeletedWarning(2, 5)}},
		{name: "abort in a namespace the mirror alone shows terminating", index: &fakeIndex{locked: lockedStable().locked, terminating: map[string]bool{global: true}},
			req: req(d, next(), nil), wantMessage: []string{"deleting a candidate"}, wantSAR: []authorizationv1.ResourceAttributes{stableUnlock}},
		{name: "status of a candidate of a locked source", index: lockedStable(), req: sub(req(u, next(), next()), "status"),
			wantMessage: []string{"updating the status subresource of a candidate"}, wantSAR: []authorizationv1.ResourceAttributes{stableUnlock}},
		{name: "moving a candidate off a locked source", index: lockedStable(),
			req:         req(u, next(), roleBinding(global, "org-viewers.next", candidateFor("other", canary))),
			wantMessage: []string{`"org-viewers", which is locked`}, wantSAR: []authorizationv1.ResourceAttributes{stableUnlock}},
		{name: "lock unknown", index: &fakeIndex{lockedErr: errBoom}, req: req(c, nil, next()), wantStatus: 503},
		{name: "unlock unanswerable", index: lockedStable(), answers: map[authorizationv1.ResourceAttributes]answer{stableUnlock: {err: errBoom}},
			req: req(c, nil, next()), wantStatus: 503, wantSAR: []authorizationv1.ResourceAttributes{stableUnlock}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runGuard(t, webhookconfig.PathCandidates, tc)
		})
	}
}

// A candidate's update never gets the fan-out warning: a candidate never
// shows under its own name; the candidates guard warns instead.
func TestFanoutLeavesCandidates(t *testing.T) {
	t.Parallel()
	rb := roleBinding(global, "org-viewers.next", candidateFor("org-viewers", v1alpha1.LabelStage+"=canary"))
	runGuard(t, webhookconfig.PathFanout, guardCase{
		index: &fakeIndex{reach: 7},
		req:   request(admissionv1.Update, rolebindings, global, "org-viewers.next", rb, rb), wantAllowed: true,
	})
}

func TestStages(t *testing.T) {
	t.Parallel()
	c, u := admissionv1.Create, admissionv1.Update
	staged := func(v string) nsOpt { return func(n *corev1.Namespace) { n.Labels[v1alpha1.LabelStage] = v } }
	other := func(n *corev1.Namespace) { n.Labels["team"] = "a" }
	stage := authorizationv1.ResourceAttributes{Verb: admission.StageVerb, Resource: "namespaces", Namespace: "team-a", Name: "team-a"}
	may := map[authorizationv1.ResourceAttributes]answer{stage: {allowed: true}}
	nsReq := func(op admissionv1.Operation, old, obj *corev1.Namespace) *admissionv1.AdmissionRequest {
		var o runtime.Object
		if old != nil {
			o = old
		}
		return request(op, schema.GroupResource{Resource: "namespaces"}, "", "team-a", o, obj)
	}
	tests := []guardCase{
		{name: "set without stage", req: nsReq(u, ns("team-a", "org"), ns("team-a", "org", staged("canary"))),
			wantMessage: []string{`setting implicit.dev/stage: "canary" on namespace "team-a" needs the "stage" permission`, "RBAC verb \"stage\" on namespaces"},
			wantSAR:     []authorizationv1.ResourceAttributes{stage}},
		{name: "set with stage", answers: may, req: nsReq(u, ns("team-a", "org"), ns("team-a", "org", staged("canary"))),
			wantAllowed: true, wantSAR: []authorizationv1.ResourceAttributes{stage}},
		{name: "change without stage", req: nsReq(u, ns("team-a", "org", staged("prod")), ns("team-a", "org", staged("canary"))),
			wantMessage: []string{`changing implicit.dev/stage from "prod" to "canary"`}, wantSAR: []authorizationv1.ResourceAttributes{stage}},
		{name: "remove without stage", req: nsReq(u, ns("team-a", "org", staged("prod")), ns("team-a", "org")),
			wantMessage: []string{`removing implicit.dev/stage: "prod"`}, wantSAR: []authorizationv1.ResourceAttributes{stage}},
		{name: "set to empty without stage", req: nsReq(u, ns("team-a", "org"), ns("team-a", "org", staged(""))),
			wantMessage: []string{`setting implicit.dev/stage: ""`}, wantSAR: []authorizationv1.ResourceAttributes{stage}},
		{name: "create with a stage", req: nsReq(c, nil, ns("team-a", "org", staged("canary"))),
			wantMessage: []string{"setting implicit.dev/stage"}, wantSAR: []authorizationv1.ResourceAttributes{stage}},
		{name: "create with a stage, allowed", answers: may, req: nsReq(c, nil, ns("team-a", "org", staged("canary"))),
			wantAllowed: true, wantSAR: []authorizationv1.ResourceAttributes{stage}},
		{name: "create without a stage", req: nsReq(c, nil, ns("team-a", "org")), wantAllowed: true},
		{name: "other labels change, stage kept", req: nsReq(u, ns("team-a", "org", staged("prod")), ns("team-a", "org", staged("prod"), other)), wantAllowed: true},
		{name: "status subresource setting it", req: sub(nsReq(u, ns("team-a", "org"), ns("team-a", "org", staged("canary"))), "status"),
			wantMessage: []string{"setting implicit.dev/stage"}, wantSAR: []authorizationv1.ResourceAttributes{stage}},
		{name: "authorizer fails", answers: map[authorizationv1.ResourceAttributes]answer{stage: {err: errBoom}},
			req: nsReq(u, ns("team-a", "org"), ns("team-a", "org", staged("canary"))), wantStatus: 503, wantSAR: []authorizationv1.ResourceAttributes{stage}},
		{name: "not a namespace", req: request(u, rolebindings, "team-a", "x", roleBinding("team-a", "x"), roleBinding("team-a", "x")), wantAllowed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runGuard(t, webhookconfig.PathStages, tc)
		})
	}
}

// TestSecondCandidateBackToBack: two candidates for one stable source,
// created back to back before the mirror shows the first, are one too many
// (DESIGN.md: at most one per stable source). Both admitted, neither
// applies (merge.StageLevels), so the second takes the first out of its
// canaries' views, a locked first one too (a candidate is locked when
// either it or its stable source is): who may not unlock it could take
// its item from the views by creating a second. The guard remembers the
// candidates it admitted a moment ago, as the lock guard does
// (openCandidate). The same candidate sent again is no second one.
func TestSecondCandidateBackToBack(t *testing.T) {
	t.Parallel()
	const canary = v1alpha1.LabelStage + "=canary"
	m := hierarchyMux(t, []*corev1.Namespace{ns(global, ""), ns("org", "")}, roleBinding("org", "viewers"))
	g := admission.NewGuards(admission.Config{
		Mirror: admission.MirrorOf(whatif.New(m)), Authorizer: &fakeAuthorizer{},
		Served: served, GlobalNamespaces: []string{global}, Namespaces: namespaceClient(global, "org"),
	})
	first := roleBinding("org", "viewers.next", candidateFor("viewers", canary), isLocked)
	if resp, _ := review(t, g, webhookconfig.PathCandidates, request(admissionv1.Create, rolebindings, "org", "viewers.next", nil, first)); resp == nil || !resp.Allowed {
		t.Fatalf("the first candidate was refused: %+v", resp)
	}
	if resp, _ := review(t, g, webhookconfig.PathCandidates, request(admissionv1.Update, rolebindings, "org", "viewers.next", first, first)); resp == nil || !resp.Allowed {
		t.Fatalf("the first candidate, sent again, was refused: %+v", resp)
	}
	second := roleBinding("org", "viewers.v2", candidateFor("viewers", "!"+v1alpha1.LabelStage))
	resp, _ := review(t, g, webhookconfig.PathCandidates, request(admissionv1.Create, rolebindings, "org", "viewers.v2", nil, second))
	if resp == nil {
		t.Fatal("no answer")
	}
	if resp.Allowed {
		t.Fatal("a second candidate for org/viewers was admitted a moment after the first (the mirror showing neither)")
	}
	if !strings.Contains(resp.Result.Message, `"viewers.next"`) {
		t.Errorf("the refusal does not name the first candidate: %s", resp.Result.Message)
	}
	// The first may never have been stored (another webhook refused it),
	// or be gone already: editing or deleting it is then no way out.
	if !strings.Contains(resp.Result.Message, "try again in 30s") {
		t.Errorf("the refusal does not say when to try again if the first does not exist: %s", resp.Result.Message)
	}
	t.Logf("refused: %s", resp.Result.Message)
}
