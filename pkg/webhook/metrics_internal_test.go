package webhook

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

func TestMain(m *testing.M) {
	// The server's wiring registers them; the tests that read them first.
	RegisterMetrics(legacyregistry.MustRegister)
	os.Exit(m.Run())
}

// answer is what a fake webhook writes: a review, or an error status.
type answer struct {
	status int
	review runtime.Object
}

// fakeWebhook answers each request with the next answer, writing a review
// with Type.Write as the webhooks do.
func fakeWebhook(t *testing.T, answers []answer) http.Handler {
	t.Helper()
	next := 0
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		a := answers[next]
		next++
		if a.status != 0 {
			http.Error(w, "refused", a.status)
			return
		}
		typ := Type{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}
		if _, ok := a.review.(*authorizationv1.SubjectAccessReview); ok {
			typ = Type{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"}
		}
		if err := typ.Write(w, a.review); err != nil {
			t.Errorf("writing: %v", err)
		}
	})
}

// counts reads metric's counters of the label values in match, by decision.
func counts(t *testing.T, metric string, match map[string]string) map[string]float64 {
	t.Helper()
	got, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, metric, match, "decision")
	if err != nil && strings.Contains(err.Error(), "not found") {
		// Nothing counted yet.
		return map[string]float64{}
	}
	if err != nil {
		t.Fatalf("reading %s: %v", metric, err)
	}
	return got
}

func delta(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func serve(t *testing.T, h http.Handler, path string, n int) {
	t.Helper()
	for range n {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, path, strings.NewReader("{}")))
	}
}

func admissionReview(allowed bool) *admissionv1.AdmissionReview {
	resp := &admissionv1.AdmissionResponse{UID: "u", Allowed: allowed}
	if !allowed {
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Message: "no"}
	}
	return &admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Response: resp}
}

// TestMeasureAdmission: each guard's answers are counted under its own
// guard label, by the decision its AdmissionReview carries, and every
// answer that is not a review (the guard could not decide, the caller was
// refused) as an error; each answer is timed.
func TestMeasureAdmission(t *testing.T) {
	locks := MeasureAdmission("/admission/locks", fakeWebhook(t, []answer{
		{review: admissionReview(true)},
		{review: admissionReview(false)},
		{review: admissionReview(true)},
		{status: http.StatusServiceUnavailable},
		{status: http.StatusUnauthorized},
	}))
	parents := MeasureAdmission("/admission/parents", fakeWebhook(t, []answer{
		{review: admissionReview(false)},
		{status: http.StatusBadRequest},
	}))
	byGuard := func() map[string]map[string]float64 {
		return map[string]map[string]float64{
			"locks":   counts(t, "implicit_admission_decisions_total", map[string]string{"guard": "locks"}),
			"parents": counts(t, "implicit_admission_decisions_total", map[string]string{"guard": "parents"}),
		}
	}
	timed := func(guard string) uint64 {
		n, err := testutil.GetHistogramMetricCount(admissionDuration.WithLabelValues(guard))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before, lockTimed, parentTimed := byGuard(), timed("locks"), timed("parents")
	serve(t, locks, "/admission/locks", 5)
	serve(t, parents, "/admission/parents", 2)
	after := byGuard()

	want := map[string]map[string]float64{
		"locks":   {"allowed": 2, "denied": 1, "error": 2},
		"parents": {"denied": 1, "error": 1},
	}
	for guard, w := range want {
		if got := delta(before[guard], after[guard]); !equal(got, w) {
			t.Errorf("implicit_admission_decisions_total{guard=%q} rose by %v, want %v", guard, got, w)
		}
	}
	if n := timed("locks") - lockTimed; n != 5 {
		t.Errorf("implicit_admission_request_duration_seconds{guard=\"locks\"} counted %d answers, want 5", n)
	}
	if n := timed("parents") - parentTimed; n != 2 {
		t.Errorf("implicit_admission_request_duration_seconds{guard=\"parents\"} counted %d answers, want 2", n)
	}
}

// TestMeasureAuthorize: /authorize's answers are counted by the decision
// their SubjectAccessReview status carries (an empty one is no opinion, an
// evaluation error an error), and answers that are no review as errors.
func TestMeasureAuthorize(t *testing.T) {
	sar := func(st authorizationv1.SubjectAccessReviewStatus) *authorizationv1.SubjectAccessReview {
		return &authorizationv1.SubjectAccessReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview"},
			Spec:     authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "team-a", Verb: "get", Resource: "pods"}},
			Status:   st,
		}
	}
	h := MeasureAuthorize(fakeWebhook(t, []answer{
		{review: sar(authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "inherited"})},
		{review: sar(authorizationv1.SubjectAccessReviewStatus{})},
		{review: sar(authorizationv1.SubjectAccessReviewStatus{})},
		{review: sar(authorizationv1.SubjectAccessReviewStatus{EvaluationError: "implicit.dev: boom"})},
		{review: sar(authorizationv1.SubjectAccessReviewStatus{Denied: true})},
		{status: http.StatusUnauthorized},
	}))
	timed := func() uint64 {
		vec, err := testutil.GetHistogramVecFromGatherer(legacyregistry.DefaultGatherer, "implicit_authorize_request_duration_seconds", nil)
		if err != nil {
			t.Fatal(err)
		}
		return vec.GetAggregatedSampleCount()
	}
	timedBefore := timed()
	before := counts(t, "implicit_authorize_decisions_total", nil)
	serve(t, h, "/authorize", 6)
	got := delta(before, counts(t, "implicit_authorize_decisions_total", nil))
	if want := map[string]float64{"allowed": 1, "no_opinion": 2, "error": 2, "denied": 1}; !equal(got, want) {
		t.Errorf("implicit_authorize_decisions_total rose by %v, want %v", got, want)
	}
	if n := timed() - timedBefore; n != 6 {
		t.Errorf("implicit_authorize_request_duration_seconds counted %d answers, want 6", n)
	}
}

// TestMeasuredWriterPassesThrough: the measured handler's caller gets what
// the handler wrote, status and body.
func TestMeasuredWriterPassesThrough(t *testing.T) {
	h := MeasureAdmission("/admission/stages", fakeWebhook(t, []answer{{review: admissionReview(false)}, {status: http.StatusServiceUnavailable}}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/admission/stages", nil))
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != http.StatusOK || out.Response == nil || out.Response.Allowed {
		t.Errorf("got %d %q (%v), want 200 and a denial", rec.Code, rec.Body.String(), err)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/admission/stages", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "refused") {
		t.Errorf("got %d %q, want 503 refused", rec.Code, rec.Body.String())
	}
}

func equal(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
