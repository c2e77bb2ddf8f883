package admission_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// exceptionNow is the guards' clock in the exception tests.
var exceptionNow = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

var (
	bob        = authenticationv1.UserInfo{Username: "bob", UID: "uid-bob", Groups: []string{"org-admins", "system:authenticated"}}
	serverUser = authenticationv1.UserInfo{Username: server, Groups: []string{"system:serviceaccounts"}}
)

// InheritedItems implements admission.ExceptionIndex: the inherited items
// of resource in namespace, sorted by name, whatever next says.
func (f *fakeIndex) InheritedItems(resource, namespace string, _ whatif.NamespaceMeta) ([]merge.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []merge.Result
	prefix := resource + " " + namespace + " "
	for _, k := range slices.Sorted(maps.Keys(f.inherited)) {
		if strings.HasPrefix(k, prefix) {
			out = append(out, f.inherited[k])
		}
	}
	return out, f.inheritedErr
}

// exceptionCase is one namespace write to the parents guard, judged on its
// exceptions, and what it must answer.
type exceptionCase struct {
	name     string
	user     *authenticationv1.UserInfo // default alice
	old, obj *corev1.Namespace          // old nil: a creation
	// noIdentity: the server's own identity is not known yet.
	noIdentity bool
	answers    map[authorizationv1.ResourceAttributes]answer
	allowed    bool
	status     int // the HTTP status, when not 200
	want       []string
	wantSAR    []authorizationv1.ResourceAttributes
	// hubAnswers are the hub cluster "hub"'s access answers; wantHubSAR
	// the questions it must be asked.
	hubAnswers map[authorizationv1.ResourceAttributes]answer
	wantHubSAR []authorizationv1.ResourceAttributes
}

// teamA is the namespace the exception tests write: team-a under org, with
// opts.
func teamA(opts ...nsOpt) *corev1.Namespace {
	return ns("team-a", "org", append([]nsOpt{recorded}, opts...)...)
}

func annotate(k, v string) nsOpt {
	return func(n *corev1.Namespace) { n.Annotations[k] = v }
}

func jsonOf(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// exception is alice's exception name of rolebindings/<item>, with mods.
func exception(name, item string, mods ...func(*v1alpha1.ExceptionSpec)) v1alpha1.ExceptionSpec {
	s := v1alpha1.ExceptionSpec{Name: name, Exclude: []string{"rolebindings/" + item}, Reason: "TICKET-42", RequestedBy: "alice"}
	for _, m := range mods {
		m(&s)
	}
	return s
}

func ending(d time.Duration) func(*v1alpha1.ExceptionSpec) {
	return func(s *v1alpha1.ExceptionSpec) { s.ExpiresAt = &metav1.Time{Time: exceptionNow.Add(d)} }
}

func requestedBy(u string) func(*v1alpha1.ExceptionSpec) {
	return func(s *v1alpha1.ExceptionSpec) { s.RequestedBy = u }
}

// approve is the SubjectAccessReview an approval asks on a source.
func approve(namespace, name string) authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Verb: admission.ApproveVerb, Group: rolebindings.Group, Resource: rolebindings.Resource, Namespace: namespace, Name: name}
}

// exceptionMirror holds the sources whose rules the tests meet: in the
// global namespace one requiring approval, one requiring an end within
// 720h, one with a maximum that does not parse, a locked one and a plain
// one; team-b already excepts needs-end until 24h from now.
func exceptionMirror(t *testing.T) admission.Mirror {
	t.Helper()
	teamB := ns("team-b", "org", recorded, annotate(v1alpha1.AnnotationExceptions,
		jsonOf(t, []v1alpha1.ExceptionSpec{exception("e1", "needs-end", ending(24*time.Hour))})))
	m := hierarchyMux(t, []*corev1.Namespace{ns(global, ""), ns("org", ""), teamA(), teamB},
		roleBinding(global, "needs-approval", annotated(v1alpha1.AnnotationExceptionApproval, "required")),
		roleBinding(global, "needs-end", annotated(v1alpha1.AnnotationExceptionMaxDuration, "720h")),
		roleBinding(global, "z-bad-max", annotated(v1alpha1.AnnotationExceptionMaxDuration, "forever")),
		roleBinding(global, "locked", isLocked),
		roleBinding(global, "plain"),
	)
	return admission.MirrorOf(whatif.New(m))
}

func runException(t *testing.T, tc exceptionCase) {
	t.Helper()
	authz, hub := &fakeAuthorizer{answers: tc.answers}, &fakeAuthorizer{answers: tc.hubAnswers}
	cfg := admission.Config{Mirror: exceptionMirror(t), Authorizer: authz, Served: served, GlobalNamespaces: []string{global},
		Namespaces: namespaceClient(hostNamespaces...), ServerIdentity: server, Clock: clocktesting.NewFakePassiveClock(exceptionNow),
		Hub: hub, HubCluster: "hub"}
	if tc.noIdentity {
		cfg.ServerIdentity = ""
	}
	g := admission.NewGuards(cfg)
	op := admissionv1.Update
	if tc.old == nil {
		op = admissionv1.Create
	}
	req := request(op, nsGR, "", tc.obj.Name, tc.old, tc.obj)
	if tc.user != nil {
		req.UserInfo = *tc.user
	}
	resp, status := review(t, g, webhookconfig.PathParents, req)
	want := tc.status
	if want == 0 {
		want = http.StatusOK
	}
	if status != want {
		t.Fatalf("HTTP status %d, want %d", status, want)
	}
	if resp != nil {
		msg := ""
		if resp.Result != nil {
			msg = resp.Result.Message
		}
		if resp.Allowed != tc.allowed {
			t.Fatalf("allowed = %v, want %v: %s", resp.Allowed, tc.allowed, msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("message %q does not contain %q", msg, w)
			}
		}
	}
	var asked []authorizationv1.ResourceAttributes
	for _, q := range authz.asked() {
		asked = append(asked, q.attrs)
		if !reflect.DeepEqual(q.user, req.UserInfo) {
			t.Errorf("asked about %+v, want the requester %+v", q.user, req.UserInfo)
		}
	}
	if !reflect.DeepEqual(asked, tc.wantSAR) {
		t.Errorf("asked %+v, want %+v", asked, tc.wantSAR)
	}
	var hubAsked []authorizationv1.ResourceAttributes
	for _, q := range hub.asked() {
		hubAsked = append(hubAsked, q.attrs)
	}
	if !reflect.DeepEqual(hubAsked, tc.wantHubSAR) {
		t.Errorf("asked the hub %+v, want %+v", hubAsked, tc.wantHubSAR)
	}
}

// TestExceptionSpecs: an exception added or changed is written by its
// requester, well formed, of served views, ends in the future, excepts no
// locked item and ends within each source's maximum; one left as it was is
// not judged again; a creation adds them all.
func TestExceptionSpecs(t *testing.T) {
	t.Parallel()
	with := func(specs ...v1alpha1.ExceptionSpec) nsOpt {
		return annotate(v1alpha1.AnnotationExceptions, jsonOf(t, specs))
	}
	tests := []exceptionCase{
		{name: "malformed", old: teamA(), obj: teamA(annotate(v1alpha1.AnnotationExceptions, `{"name":"x"}`)),
			want: []string{"implicit.dev/exceptions must be a JSON list of exceptions"}},
		{name: "a reason is required", old: teamA(), obj: teamA(with(exception("e", "plain", func(s *v1alpha1.ExceptionSpec) { s.Reason = " " }))),
			want: []string{`exception "e": reason is required`}},
		{name: "requestedBy is the writer", old: teamA(), obj: teamA(with(exception("e", "plain", requestedBy("bob")))),
			want: []string{"requestedBy must be the user writing it (alice)"}},
		{name: "a view served", old: teamA(), obj: teamA(with(exception("e", "plain", func(s *v1alpha1.ExceptionSpec) { s.Exclude = []string{"rolebinding/plain"} }))),
			want: []string{`implicit.dev serves no view "rolebinding" (a view is named by its plural resource name: rolebindings/plain)`}},
		{name: "an end in the past", old: teamA(), obj: teamA(with(exception("e", "plain", ending(-time.Second)))),
			want: []string{`expiresAt 2026-11-28T11:59:59Z must be in the future`}},
		{name: "an exception of a locked item", old: teamA(), obj: teamA(with(exception("e", "locked"))),
			want: []string{"rolebindings implicit-global/locked (global) is locked: an exception of a locked item is refused"}},
		{name: "a wildcard takes in the locked item", old: teamA(), obj: teamA(with(exception("e", "*", ending(time.Hour)))),
			want: []string{"rolebindings implicit-global/locked (global) is locked"}},
		{name: "a required end", old: teamA(), obj: teamA(with(exception("e", "needs-end"))),
			want: []string{"the source of rolebindings implicit-global/needs-end (global) requires an end: set expiresAt, at most 720h0m0s from now"}},
		{name: "an end past the maximum", old: teamA(), obj: teamA(with(exception("e", "needs-end", ending(721*time.Hour)))),
			want: []string{"expiresAt 2026-12-28T13:00:00Z is past the maximum the source implicit-global/needs-end allows: 720h0m0s from now"}},
		{name: "an end within the maximum", old: teamA(), obj: teamA(with(exception("e", "needs-end", ending(719*time.Hour)))), allowed: true},
		{name: "a maximum that does not parse", old: teamA(), obj: teamA(with(exception("e", "z-bad-max", ending(time.Hour)))),
			want: []string{"implicit.dev/exception-max-duration is not a positive duration"}},
		{name: "a name declared twice", old: teamA(), obj: teamA(with(exception("e", "plain"), exception("e", "other"))),
			want: []string{`exception "e" is declared twice`}},
		{name: "an exception left as it was is not judged again",
			old: teamA(with(exception("old", "locked", requestedBy("carol")))), obj: teamA(with(exception("old", "locked", requestedBy("carol")), exception("e", "plain"))), allowed: true},
		{name: "an edit is judged", old: teamA(with(exception("e", "needs-end", ending(time.Hour), requestedBy("carol")))),
			obj:  teamA(with(exception("e", "needs-end", ending(800*time.Hour)))),
			want: []string{"past the maximum the source implicit-global/needs-end allows"}},
		{name: "a creation judges every exception", obj: ns("team-new", "", annotate(v1alpha1.AnnotationExceptions, jsonOf(t, []v1alpha1.ExceptionSpec{exception("e", "locked")}))),
			want: []string{"namespace team-new: exception \"e\": rolebindings implicit-global/locked (global) is locked"}},
		// team-b's exception e1 excludes needs-end now: its edit is judged on
		// the item all the same.
		{name: "an item excluded now is judged all the same",
			old:  ns("team-b", "org", recorded, with(exception("e1", "needs-end", ending(24*time.Hour)))),
			obj:  ns("team-b", "org", recorded, with(exception("e1", "needs-end", ending(24000*time.Hour)))),
			want: []string{"past the maximum the source implicit-global/needs-end allows"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runException(t, tc)
		})
	}
}

// TestExceptionsExpiredMark: only the server's own identity writes
// implicit.dev/exceptions-expired, and it writes nothing else.
func TestExceptionsExpiredMark(t *testing.T) {
	t.Parallel()
	e := exception("e", "plain", ending(time.Hour))
	declared := annotate(v1alpha1.AnnotationExceptions, jsonOf(t, []v1alpha1.ExceptionSpec{e}))
	marked := annotate(v1alpha1.AnnotationExceptionsExpired, jsonOf(t, map[string]string{"e": merge.ExceptionDigest(e)}))
	tests := []exceptionCase{
		{name: "a tenant marks an exception expired", old: teamA(declared), obj: teamA(declared, marked),
			want: []string{"implicit.dev/exceptions-expired is written by implicit-apiserver only, at an exception's end"}},
		{name: "a tenant removes the mark", old: teamA(declared, marked), obj: teamA(declared),
			want: []string{"implicit.dev/exceptions-expired is written by implicit-apiserver only"}},
		{name: "the server marks it", user: &serverUser, old: teamA(declared), obj: teamA(declared, marked), allowed: true},
		{name: "the server changes something else too", user: &serverUser, old: teamA(declared), obj: teamA(declared, marked, annotate(v1alpha1.AnnotationExclude, "rolebindings/plain")),
			want: []string{"implicit-apiserver's own identity writes only implicit.dev/exceptions-expired of a namespace; this write changes other annotations too"}},
		// Without a mark, the server's write is judged as anyone's (the
		// tests' control planes run it as their admin).
		{name: "the server changes an exception", user: &serverUser, old: teamA(declared),
			obj:  teamA(annotate(v1alpha1.AnnotationExceptions, jsonOf(t, []v1alpha1.ExceptionSpec{exception("e", "plain", ending(2*time.Hour))}))),
			want: []string{"requestedBy must be the user writing it"}},
		{name: "the server writes a malformed mark", user: &serverUser, old: teamA(declared), obj: teamA(declared, annotate(v1alpha1.AnnotationExceptionsExpired, "e")),
			want: []string{"implicit.dev/exceptions-expired must be a JSON object"}},
		{name: "the server's identity is not known yet", noIdentity: true, old: teamA(declared), obj: teamA(declared, marked), status: http.StatusServiceUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runException(t, tc)
		})
	}
}

// TestExclusionNeedsException: an implicit.dev/exclude entry added for an
// item whose source requires an approved exception, or one with an end, is
// refused, naming the way to request one; entries already there are not
// judged again.
func TestExclusionNeedsException(t *testing.T) {
	t.Parallel()
	exclude := func(v string) nsOpt { return annotate(v1alpha1.AnnotationExclude, v) }
	tests := []exceptionCase{
		{name: "a source requiring approval", old: teamA(), obj: teamA(exclude("rolebindings/plain,rolebindings/needs-approval")),
			want: []string{"rolebindings implicit-global/needs-approval (global) requires an approved exception",
				"request an exception: kubectl implicit exceptions request NAME -n team-a --exclude rolebindings/needs-approval --reason ... [--expires ...]"}},
		{name: "a source requiring an end", old: teamA(), obj: teamA(exclude("rolebindings/needs-end")),
			want: []string{"rolebindings implicit-global/needs-end (global) requires an exception with an end", "--exclude rolebindings/needs-end"}},
		{name: "a wildcard takes them in", obj: ns("team-new", "", exclude("rolebindings/*")),
			want: []string{"implicit-global/needs-approval (global) requires an approved exception", "implicit-global/needs-end (global) requires an exception with an end"}},
		{name: "a plain source", old: teamA(), obj: teamA(exclude("rolebindings/plain")), allowed: true},
		{name: "an entry already there", old: teamA(exclude("rolebindings/needs-approval")), obj: teamA(exclude("rolebindings/needs-approval,rolebindings/plain")), allowed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runException(t, tc)
		})
	}
}
