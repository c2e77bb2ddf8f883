package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// exceptionsServer answers as kube-apiserver with implicit-apiserver
// would: SelfSubjectReviews (user), namespace team-a (get, merge patch,
// kept as patched), the view rolebindings.implicit.dev of team-a (one item
// inherited from org, one team-a's own) and exceptions.implicit.dev.
type exceptionsServer struct {
	user    string
	mu      sync.Mutex
	ns      corev1.Namespace
	patches []map[string]any
	list    v1alpha1.ExceptionList
}

func (s *exceptionsServer) start(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/selfsubjectreviews"):
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{Username: s.user}}})
		case r.URL.Path == "/api/v1/namespaces/team-a" && r.Method == http.MethodGet:
			_ = json.NewEncoder(w).Encode(s.ns)
		case r.URL.Path == "/api/v1/namespaces/team-a" && r.Method == http.MethodPatch:
			b, _ := io.ReadAll(r.Body)
			var p map[string]any
			_ = json.Unmarshal(b, &p)
			s.patches = append(s.patches, p)
			md := p["metadata"].(map[string]any)
			for k, v := range md["annotations"].(map[string]any) {
				if s.ns.Annotations == nil {
					s.ns.Annotations = map[string]string{}
				}
				s.ns.Annotations[k] = v.(string)
			}
			_ = json.NewEncoder(w).Encode(s.ns)
		case r.URL.Path == "/apis/implicit.dev/v1alpha1/namespaces/team-a/rolebindings":
			_, _ = io.WriteString(w, `{"apiVersion":"implicit.dev/v1alpha1","kind":"RoleBindingList","items":[
				{"apiVersion":"implicit.dev/v1alpha1","kind":"RoleBinding","metadata":{"name":"ci-bot","namespace":"team-a","labels":{"implicit.dev/source-namespace":"org"}}},
				{"apiVersion":"implicit.dev/v1alpha1","kind":"RoleBinding","metadata":{"name":"own","namespace":"team-a","labels":{"implicit.dev/source-namespace":"team-a"}}}]}`)
		case strings.HasSuffix(r.URL.Path, "/exceptions"):
			l := s.list
			l.APIVersion, l.Kind = v1alpha1.SchemeGroupVersion.String(), "ExceptionList"
			if strings.Contains(r.URL.Path, "/namespaces/") {
				l.Items = nil
				for _, e := range s.list.Items {
					if e.Namespace != "other" {
						l.Items = append(l.Items, e)
					}
				}
			}
			_ = json.NewEncoder(w).Encode(l)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (s *exceptionsServer) annotation(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ns.Annotations[key]
}

// TestExceptionsList: the table names where each is declared, what it
// excepts, state, people and time left; -A lists every namespace's;
// -o yaml prints the list.
func TestExceptionsList(t *testing.T) {
	t.Parallel()
	ends := metav1.NewTime(time.Now().Add(7*24*time.Hour - 30*time.Minute))
	s := &exceptionsServer{list: v1alpha1.ExceptionList{Items: []v1alpha1.Exception{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "org", Name: "old"}, Spec: v1alpha1.ExceptionSpec{Exclude: []string{"rolebindings/x"}, Reason: "T-0", RequestedBy: "carol"},
			Status: v1alpha1.ExceptionStatus{State: v1alpha1.ExceptionExpired, Digest: "d0"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "ci"}, Spec: v1alpha1.ExceptionSpec{Exclude: []string{"rolebindings/ci-bot", "networkpolicies/*"}, Reason: "TICKET-1", RequestedBy: "alice", ExpiresAt: &ends},
			Status: v1alpha1.ExceptionStatus{State: v1alpha1.ExceptionActive, Digest: "d1", Approval: &v1alpha1.ExceptionApproval{By: "bob"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "gated"}, Spec: v1alpha1.ExceptionSpec{Exclude: []string{"rolebindings/g"}, Reason: "T-2", RequestedBy: "dave"},
			Status: v1alpha1.ExceptionStatus{State: v1alpha1.ExceptionRequested, Digest: "d2", NeedsApproval: []string{"rolebindings implicit-global/g"}}},
	}}}
	flags := serverFlags(t, s.start(t))
	code, out, errOut := runPlugin(t, append(flags, "exceptions", "-n", "team-a")...)
	if code != exitOK {
		t.Fatalf("exceptions: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`(?m)^NAMESPACE\s+NAME\s+EXCLUDES\s+STATE\s+REASON\s+REQUESTER\s+APPROVER\s+ENDS$`,
		`(?m)^org\s+old\s+rolebindings/x\s+Expired\s+T-0\s+carol\s+<none>\s+expired$`,
		`(?m)^team-a\s+ci\s+rolebindings/ci-bot,networkpolicies/\*\s+Active\s+TICKET-1\s+alice\s+bob\s+6d23h$`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("exceptions -n team-a lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "gated") {
		t.Errorf("exceptions -n team-a lists another lineage's:\n%s", out)
	}
	code, out, _ = runPlugin(t, append(flags, "exceptions", "-A", "-o", "wide")...)
	if want := `(?m)^other\s+gated\s+rolebindings/g\s+Requested\s+T-2\s+dave\s+<none>\s+-\s+rolebindings implicit-global/g\s+d2$`; code != exitOK || !regexp.MustCompile(want).MatchString(out) {
		t.Errorf("exceptions -A -o wide: exit %d, lacks %s:\n%s", code, want, out)
	}
	code, out, _ = runPlugin(t, append(flags, "exceptions", "-A", "-o", "yaml")...)
	if code != exitOK || !strings.Contains(out, "kind: ExceptionList") || !strings.Contains(out, "state: Requested") {
		t.Errorf("exceptions -A -o yaml: exit %d\n%s", code, out)
	}
}

// TestExceptionRequestAndApprove: request writes the exception as the
// user (requestedBy from a SelfSubjectReview) with the namespace's
// resourceVersion, keeping the others; approve writes this version's
// digest, the approver and the source namespaces of the items it names in
// the view (not the namespace's own).
func TestExceptionRequestAndApprove(t *testing.T) {
	t.Parallel()
	keep := v1alpha1.ExceptionSpec{Name: "keep", Exclude: []string{"roles/r"}, Reason: "x", RequestedBy: "carol"}
	keepJSON, _ := json.Marshal([]v1alpha1.ExceptionSpec{keep})
	s := &exceptionsServer{user: "alice", ns: corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", ResourceVersion: "42",
		Annotations: map[string]string{v1alpha1.AnnotationExceptions: string(keepJSON)}}}}
	flags := serverFlags(t, s.start(t))
	before := time.Now()
	code, out, errOut := runPlugin(t, append(flags, "exceptions", "request", "ci", "-n", "team-a", "--exclude", "rolebindings/ci-bot,rolebindings/own", "--reason", "TICKET-1", "--expires", "20s")...)
	if code != exitOK {
		t.Fatalf("request: exit %d\n%s%s", code, out, errOut)
	}
	specs, err := merge.ParseExceptions(s.annotation(v1alpha1.AnnotationExceptions))
	if err != nil || len(specs) != 2 || specs[0].Name != "ci" || specs[1].Name != "keep" {
		t.Fatalf("exceptions after request: %v %+v", err, specs)
	}
	ci := specs[0]
	if ci.RequestedBy != "alice" || ci.Reason != "TICKET-1" || len(ci.Exclude) != 2 || ci.ExpiresAt == nil ||
		ci.ExpiresAt.Time.Before(before.Add(19*time.Second)) || ci.ExpiresAt.Time.After(time.Now().Add(20*time.Second)) {
		t.Errorf("requested %+v", ci)
	}
	s.mu.Lock()
	rv := s.patches[0]["metadata"].(map[string]any)["resourceVersion"]
	s.mu.Unlock()
	if rv != "42" {
		t.Errorf("request's patch carries resourceVersion %v, want 42", rv)
	}

	s.mu.Lock()
	s.user = "bob"
	s.mu.Unlock()
	code, out, errOut = runPlugin(t, append(flags, "exceptions", "approve", "ci", "-n", "team-a")...)
	if code != exitOK {
		t.Fatalf("approve: exit %d\n%s%s", code, out, errOut)
	}
	approvals, err := merge.ParseExceptionApprovals(s.annotation(v1alpha1.AnnotationExceptionApprovals))
	if err != nil {
		t.Fatal(err)
	}
	a := approvals["ci"]
	if a.By != "bob" || a.Digest != merge.ExceptionDigest(ci) || len(a.Sources) != 1 || a.Sources[0] != "org" || a.At.IsZero() {
		t.Errorf("approval %+v, want by bob, digest %s, sources [org]", a, merge.ExceptionDigest(ci))
	}
	if code, _, errOut = runPlugin(t, append(flags, "exceptions", "approve", "nope", "-n", "team-a")...); code != exitError || !strings.Contains(errOut, `no exception "nope"`) {
		t.Errorf("approve nope: exit %d: %s", code, errOut)
	}
	if code, _, errOut = runPlugin(t, append(flags, "exceptions", "request", "x", "-n", "team-a", "--exclude", "rolebindings/a")...); code != exitError || !strings.Contains(errOut, "reason is required") {
		t.Errorf("request without a reason: exit %d: %s", code, errOut)
	}
}

// TestWhyNamesTheException: why's notes name the exception, its end, and
// why a source's rules blocked it.
func TestWhyNamesTheException(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ends := metav1.NewTime(now.Add(6*24*time.Hour + 23*time.Hour))
	for _, tt := range []struct {
		x    v1alpha1.ExclusionEffect
		want string
	}{
		{v1alpha1.ExclusionEffect{Exclusion: "rolebindings/ci", Effect: "Removed", Exception: "ci", Ends: &ends},
			"Exception ci of team-a (rolebindings/ci): ends 2026-11-07T23:00:00Z (in 6d23h)."},
		{v1alpha1.ExclusionEffect{Exclusion: "rolebindings/g", Effect: "BlockedByExceptionRules", Exception: "g", Blocked: "its source requires an approved exception"},
			"Exception g of team-a (rolebindings/g): no end; not applied: its source requires an approved exception."},
	} {
		if got := exceptionNote("team-a", tt.x, now); got != tt.want {
			t.Errorf("note\n got  %q\n want %q", got, tt.want)
		}
	}
	if got := exclusionCell(v1alpha1.ExclusionEffect{Exclusion: "rolebindings/ci", Effect: "Removed", Exception: "ci"}); got != "rolebindings/ci Removed (exception ci)" {
		t.Errorf("cell %q", got)
	}
}
