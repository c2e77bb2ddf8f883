package authz_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

// review is a SubjectAccessReview as kube-apiserver's webhook authorizer
// sends it (subjectAccessReviewVersion: v1).
func review(user string, groups []string, ra *authorizationv1.ResourceAttributes) authorizationv1.SubjectAccessReview {
	return authorizationv1.SubjectAccessReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups, UID: "uid-" + user, ResourceAttributes: ra,
		},
	}
}

func podsIn(namespace, verb string) *authorizationv1.ResourceAttributes {
	return &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Version: "v1", Resource: "pods", Name: "web"}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshalling %T: %v", v, err)
	}
	return b
}

// serve sends body to h with method and returns the response.
func serve(h http.Handler, method string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, authz.Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// decode reads a SubjectAccessReview response.
func decode(t *testing.T, rec *httptest.ResponseRecorder) authorizationv1.SubjectAccessReview {
	t.Helper()
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, body %q", rec.Code, rec.Body.String())
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var got authorizationv1.SubjectAccessReview
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("response %q: %v", rec.Body.String(), err)
	}
	if got.APIVersion != "authorization.k8s.io/v1" || got.Kind != "SubjectAccessReview" {
		t.Errorf("response is a %s %s", got.APIVersion, got.Kind)
	}
	return got
}

func TestHandler(t *testing.T) {
	t.Parallel()
	synced := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, world()...).authz.Handler()
	unsynced := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles(), unsynced: true}, world()...).authz.Handler()
	viewers := []string{"viewers", "system:authenticated"}

	tests := []struct {
		name    string
		handler http.Handler
		body    []byte
		// want is the status; wantReason and wantError substrings of the
		// reason and of evaluationError.
		want       authorizationv1.SubjectAccessReviewStatus
		wantReason string
		wantError  string
	}{
		{name: "allowed by an inherited binding", handler: synced,
			body: mustJSON(t, review("alice", viewers, podsIn("team-a", "get"))),
			want: authorizationv1.SubjectAccessReviewStatus{Allowed: true}, wantReason: `RoleBinding "global-viewers"`},
		{name: "as kube-apiserver writes it", handler: synced,
			body: []byte(`{"kind":"SubjectAccessReview","apiVersion":"authorization.k8s.io/v1","metadata":{"creationTimestamp":null},` +
				`"spec":{"resourceAttributes":{"namespace":"org-1-team-x-dev","verb":"create","version":"v1","resource":"pods"},` +
				`"user":"tom","groups":["team-x","system:authenticated"],"uid":"7"},"status":{"allowed":false}}`),
			want: authorizationv1.SubjectAccessReviewStatus{Allowed: true}, wantReason: `RoleBinding "team-x-editors" inherited from namespace "org-1-team-x"`},
		{name: "without apiVersion and kind", handler: synced,
			body: []byte(`{"spec":{"resourceAttributes":{"namespace":"team-a","verb":"get","resource":"pods"},"user":"alice","groups":["viewers"]}}`),
			want: authorizationv1.SubjectAccessReviewStatus{Allowed: true}, wantReason: `RoleBinding "global-viewers"`},
		{name: "no inherited binding: no opinion", handler: synced,
			body: mustJSON(t, review("alice", viewers, podsIn("team-a", "delete")))},
		{name: "global namespace: no opinion", handler: synced,
			body: mustJSON(t, review("alice", viewers, podsIn(global, "get")))},
		{name: "no resourceAttributes: no opinion", handler: synced,
			body: mustJSON(t, authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: "alice", Groups: viewers, NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/healthz", Verb: "get"},
			}})},
		{name: "empty namespace: no opinion", handler: synced,
			body: mustJSON(t, review("alice", viewers, &authorizationv1.ResourceAttributes{Verb: "list", Version: "v1", Resource: "nodes"}))},
		{name: "not synced: evaluation error, no opinion", handler: unsynced,
			body:      mustJSON(t, review("alice", viewers, podsIn("team-a", "get"))),
			wantError: "implicit.dev: the sources have not been read yet"},
		{name: "not synced, no resourceAttributes: no opinion, no error", handler: unsynced,
			body: mustJSON(t, review("alice", viewers, nil))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := decode(t, serve(tc.handler, http.MethodPost, tc.body))
			st := got.Status
			if st.Allowed != tc.want.Allowed || st.Denied {
				t.Errorf("status %+v, want allowed %v and never denied", st, tc.want.Allowed)
			}
			if tc.wantReason == "" && st.Reason != "" || !strings.Contains(st.Reason, tc.wantReason) {
				t.Errorf("reason %q, want %q", st.Reason, tc.wantReason)
			}
			if tc.wantError == "" && st.EvaluationError != "" || !strings.Contains(st.EvaluationError, tc.wantError) {
				t.Errorf("evaluationError %q, want %q", st.EvaluationError, tc.wantError)
			}
		})
	}
}

func TestHandlerRejects(t *testing.T) {
	t.Parallel()
	h := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, world()...).authz.Handler()
	valid := mustJSON(t, review("alice", []string{"viewers"}, podsIn("team-a", "get")))
	tests := []struct {
		name   string
		method string
		body   []byte
		want   int
	}{
		{name: "GET", method: http.MethodGet, want: http.StatusMethodNotAllowed},
		{name: "PUT", method: http.MethodPut, body: valid, want: http.StatusMethodNotAllowed},
		{name: "bad JSON", method: http.MethodPost, body: []byte(`{"spec":`), want: http.StatusBadRequest},
		{name: "not an object", method: http.MethodPost, body: []byte(`"allow me"`), want: http.StatusBadRequest},
		{name: "too large", method: http.MethodPost, body: append(append([]byte(`{"spec":{"user":"`), bytes.Repeat([]byte("a"), 1<<20)...), `"}}`...),
			want: http.StatusBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := serve(h, tc.method, tc.body)
			if rec.Code != tc.want {
				t.Fatalf("%s: status %d, want %d; body %q", tc.method, rec.Code, tc.want, rec.Body.String())
			}
			if strings.Contains(rec.Body.String(), `"allowed":true`) {
				t.Errorf("a rejected request answered allowed: %q", rec.Body.String())
			}
		})
	}
}

// TestHandlerMetrics is not parallel: it reads the process-wide counters
// while no other test runs.
func TestHandlerMetrics(t *testing.T) {
	synced := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, world()...).authz.Handler()
	unsynced := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles(), unsynced: true}, world()...).authz.Handler()
	allowed := mustJSON(t, review("alice", []string{"viewers"}, podsIn("team-a", "get")))
	noOpinion := mustJSON(t, review("alice", []string{"viewers"}, podsIn("team-a", "delete")))

	before := counters(t)
	for _, r := range []struct {
		h    http.Handler
		body []byte
	}{
		{synced, allowed}, {synced, allowed}, {synced, allowed}, // two from the cache
		{synced, noOpinion}, {synced, noOpinion}, // one from the cache
		{synced, mustJSON(t, review("alice", nil, nil))}, // no resourceAttributes: not decided, not cached
		{unsynced, allowed},
	} {
		decode(t, serve(r.h, http.MethodPost, r.body))
	}
	after := counters(t)
	want := map[string]float64{"allowed": 3, "no_opinion": 3, "error": 1, "cached": 3}
	for k, w := range want {
		if got := after[k] - before[k]; got != w {
			t.Errorf("%s: +%v, want +%v", k, got, w)
		}
	}
}

// counters reads implicit_authorization_decisions_total by decision, and
// implicit_authorize_decisions_cached_total as "cached".
func counters(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	out := map[string]float64{}
	for _, f := range families {
		switch f.GetName() {
		case "implicit_authorization_decisions_total":
			for _, m := range f.GetMetric() {
				out[labelValue(m, "decision")] = m.GetCounter().GetValue()
			}
		case "implicit_authorize_decisions_cached_total":
			for _, m := range f.GetMetric() {
				out["cached"] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
