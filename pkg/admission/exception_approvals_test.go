package admission_test

import (
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// TestExceptionApprovals: an approval added or changed is written by its
// approver, never the requester, of the exception's current version, of
// sources named, on each of which the approver may approve (a hub's asked
// of the hub); removing one, or leaving one as it was, asks nothing.
func TestExceptionApprovals(t *testing.T) {
	t.Parallel()
	e := exception("e", "needs-approval")
	declared := annotate(v1alpha1.AnnotationExceptions, jsonOf(t, []v1alpha1.ExceptionSpec{e}))
	approval := func(mods ...func(*v1alpha1.ExceptionApproval)) nsOpt {
		a := v1alpha1.ExceptionApproval{By: "bob", At: metav1.Time{Time: exceptionNow}, Digest: merge.ExceptionDigest(e), Sources: []string{global}}
		for _, m := range mods {
			m(&a)
		}
		return annotate(v1alpha1.AnnotationExceptionApprovals, jsonOf(t, map[string]v1alpha1.ExceptionApproval{"e": a}))
	}
	approvedAll, approvedOne := approve(global, ""), approve(global, "needs-approval")
	two := exception("e", "needs-approval", func(s *v1alpha1.ExceptionSpec) { s.Exclude = append(s.Exclude, "rolebindings/plain") })
	twice := annotate(v1alpha1.AnnotationExceptions, jsonOf(t, []v1alpha1.ExceptionSpec{two}))
	tests := []exceptionCase{
		{name: "an approver allowed approve on the source's namespace", user: &bob, old: teamA(declared), obj: teamA(declared, approval()),
			answers: allowAll(approvedAll), allowed: true, wantSAR: []authorizationv1.ResourceAttributes{approvedAll}},
		{name: "an approver allowed approve on the item", user: &bob, old: teamA(declared), obj: teamA(declared, approval()),
			answers: allowAll(approvedOne), allowed: true, wantSAR: []authorizationv1.ResourceAttributes{approvedAll, approvedOne}},
		{name: "without approve", user: &bob, old: teamA(declared), obj: teamA(declared, approval()),
			wantSAR: []authorizationv1.ResourceAttributes{approvedAll, approvedOne},
			want:    []string{`approving needs the "approve" permission on each source it covers`, "missing: rolebindings.rbac.authorization.k8s.io in namespace implicit-global (rolebindings/needs-approval)"}},
		{name: "the requester approves their own", old: teamA(declared), obj: teamA(declared, approval(func(a *v1alpha1.ExceptionApproval) { a.By = "alice" })),
			answers: allowAll(approvedAll), want: []string{"the requester can't approve their own request"}},
		{name: "requesting and approving in one write", user: &bob, old: teamA(),
			obj: teamA(annotate(v1alpha1.AnnotationExceptions, jsonOf(t, []v1alpha1.ExceptionSpec{exception("e", "needs-approval", requestedBy("bob"))})),
				approval(func(a *v1alpha1.ExceptionApproval) {
					a.Digest = merge.ExceptionDigest(exception("e", "needs-approval", requestedBy("bob")))
				})),
			answers: allowAll(approvedAll), want: []string{"the requester can't approve their own request (bob requested it)"}},
		{name: "an approval in another's name", old: teamA(declared), obj: teamA(declared, approval()),
			answers: allowAll(approvedAll), want: []string{`by must be the user writing it (alice), not "bob"`}},
		{name: "an earlier version", user: &bob, old: teamA(declared), obj: teamA(declared, approval(func(a *v1alpha1.ExceptionApproval) { a.Digest = "0123456789abcdef" })),
			answers: allowAll(approvedAll), want: []string{`digest "0123456789abcdef" is not the exception's current version`}},
		{name: "no such exception", user: &bob, old: teamA(), obj: teamA(approval()),
			answers: allowAll(approvedAll), want: []string{`implicit.dev/exceptions declares no exception "e" to approve`}},
		{name: "no sources", user: &bob, old: teamA(declared), obj: teamA(declared, approval(func(a *v1alpha1.ExceptionApproval) { a.Sources = nil })),
			answers: allowAll(approvedAll), want: []string{"sources must name the namespaces"}},
		{name: "a hub source, allowed approve on the hub", user: &bob, old: teamA(declared), obj: teamA(declared, approval(func(a *v1alpha1.ExceptionApproval) { a.Sources = []string{"hub/" + global} })),
			hubAnswers: allowAll(approvedAll), allowed: true, wantHubSAR: []authorizationv1.ResourceAttributes{approvedAll}},
		{name: "a hub source, allowed approve on the member only", user: &bob, old: teamA(declared), obj: teamA(declared, approval(func(a *v1alpha1.ExceptionApproval) { a.Sources = []string{"hub/" + global} })),
			answers: allowAll(approvedAll), wantHubSAR: []authorizationv1.ResourceAttributes{approvedAll, approvedOne},
			want: []string{"missing: rolebindings.rbac.authorization.k8s.io in namespace implicit-global of hub cluster hub (rolebindings/needs-approval)"}},
		{name: "a cluster this server reads nothing from", user: &bob, old: teamA(declared), obj: teamA(declared, approval(func(a *v1alpha1.ExceptionApproval) { a.Sources = []string{"elsewhere/" + global} })),
			answers: allowAll(approvedAll), hubAnswers: allowAll(approvedAll), want: []string{`this cluster reads no hub cluster "elsewhere"`}},
		{name: "malformed", user: &bob, old: teamA(declared), obj: teamA(declared, annotate(v1alpha1.AnnotationExceptionApprovals, `["e"]`)),
			want: []string{"implicit.dev/exception-approvals must be a JSON object of approvals"}},
		{name: "two items of one kind ask once for the kind", user: &bob, old: teamA(twice), obj: teamA(twice, annotate(v1alpha1.AnnotationExceptionApprovals, jsonOf(t, map[string]v1alpha1.ExceptionApproval{
			"e": {By: "bob", Digest: merge.ExceptionDigest(two), Sources: []string{global}},
		}))),
			wantSAR: []authorizationv1.ResourceAttributes{approvedAll, approvedOne, approve(global, "plain")},
			want:    []string{"(rolebindings/needs-approval); rolebindings.rbac.authorization.k8s.io in namespace implicit-global (rolebindings/plain)"}},
		{name: "removing an approval", old: teamA(declared, approval()), obj: teamA(declared), allowed: true},
		{name: "an approval left as it was is not judged again", old: teamA(declared, approval()),
			obj: teamA(declared, approval(), annotate(v1alpha1.AnnotationExclude, "rolebindings/plain")), allowed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runException(t, tc)
		})
	}
}
