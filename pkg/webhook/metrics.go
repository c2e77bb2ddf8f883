package webhook

import (
	"net/http"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/component-base/metrics"
)

// The webhooks' paths are outside k8s.io/apiserver's request metrics
// (apiserver_request_*, which cover the API only): these are theirs. Every
// request counts, refused callers included (an error: kube-apiserver sees a
// failing webhook either way).
var (
	// webhookBuckets reach past the guards' timeoutSeconds (5 s, 2 s for the
	// namespace-deletions guard) and kube-apiserver's 3 s default for the
	// authorization webhook, with steps near each.
	webhookBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 1.5, 2, 2.5, 3, 4, 5, 10}

	admissionDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace:      "implicit",
		Subsystem:      "admission",
		Name:           "request_duration_seconds",
		Help:           "Time to answer an admission review, by guard (the path after /admission/).",
		Buckets:        webhookBuckets,
		StabilityLevel: metrics.ALPHA,
	}, []string{"guard"})
	admissionDecisions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "implicit",
		Subsystem: "admission",
		Name:      "decisions_total",
		Help: "Admission reviews answered, by guard and decision: allowed, denied, or error (no review " +
			"answered: the guard could not decide, the caller was refused or sent no review; the webhook's failure policy decides).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"guard", "decision"})
	authorizeDuration = metrics.NewHistogram(&metrics.HistogramOpts{
		Namespace:      "implicit",
		Subsystem:      "authorize",
		Name:           "request_duration_seconds",
		Help:           "Time to answer a SubjectAccessReview of the authorization webhook.",
		Buckets:        webhookBuckets,
		StabilityLevel: metrics.ALPHA,
	})
	authorizeDecisions = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace: "implicit",
		Subsystem: "authorize",
		Name:      "decisions_total",
		Help: "SubjectAccessReviews answered, by decision: allowed, no_opinion, denied (never, by design), or error " +
			"(an evaluation error, or no review answered: the caller was refused or sent no review).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"decision"})
)

// RegisterMetrics registers the package's metrics with register (the
// server's wiring passes legacyregistry.MustRegister); once per process,
// later calls do nothing.
func RegisterMetrics(register func(...metrics.Registerable)) {
	registerOnce.Do(func() {
		register(admissionDuration, admissionDecisions, authorizeDuration, authorizeDecisions)
	})
}

var registerOnce sync.Once

// Decisions, as the metrics label them.
const (
	decisionAllowed   = "allowed"
	decisionDenied    = "denied"
	decisionNoOpinion = "no_opinion"
	decisionError     = "error"
)

// DecisionOf is the decision a review answer carries, as the metrics label
// it: for an AdmissionReview allowed, denied, or error without a response;
// for a SubjectAccessReview allowed, denied, no_opinion, or error with an
// evaluation error. Any other object is an error.
func DecisionOf(obj runtime.Object) string {
	switch r := obj.(type) {
	case *admissionv1.AdmissionReview:
		switch {
		case r.Response == nil:
			return decisionError
		case r.Response.Allowed:
			return decisionAllowed
		default:
			return decisionDenied
		}
	case *authorizationv1.SubjectAccessReview:
		switch {
		case r.Status.EvaluationError != "":
			return decisionError
		case r.Status.Allowed:
			return decisionAllowed
		case r.Status.Denied:
			return decisionDenied
		default:
			return decisionNoOpinion
		}
	default:
		return decisionError
	}
}

// guardLabel is the guard label of an admission path: "locks" for /admission/locks.
func guardLabel(path string) string {
	return strings.TrimPrefix(path, "/admission/")
}

// MeasureAdmission times h's answers, served at path, in
// implicit_admission_*, and counts them by the decision h's Type.Write
// recorded: an answer that wrote no review (h could not decide, the caller
// was refused or sent no review) or failed is an error.
func MeasureAdmission(path string, h http.Handler) http.Handler {
	guard := guardLabel(path)
	duration := admissionDuration.WithLabelValues(guard)
	counters := map[string]metrics.CounterMetric{}
	for _, d := range []string{decisionAllowed, decisionDenied, decisionError} {
		counters[d] = admissionDecisions.WithLabelValues(guard, d)
	}
	return measure(h, func(elapsed time.Duration, decision string) {
		duration.Observe(elapsed.Seconds())
		counters[decision].Inc()
	})
}

// MeasureAuthorize times h's answers in implicit_authorize_*, and counts
// them by the decision h's Type.Write recorded (an error without one).
func MeasureAuthorize(h http.Handler) http.Handler {
	return measure(h, func(elapsed time.Duration, decision string) {
		authorizeDuration.Observe(elapsed.Seconds())
		authorizeDecisions.WithLabelValues(decision).Inc()
	})
}

// measure serves h with a recorder in front of its writer, and hands done
// the time h took and the decision Type.Write recorded: error when it
// recorded none, or when h answered with a status other than 200.
func measure(h http.Handler, done func(elapsed time.Duration, decision string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		decision := rec.decision
		if decision == "" || (rec.status != 0 && rec.status != http.StatusOK) {
			decision = decisionError
		}
		done(time.Since(start), decision)
	})
}

// recorder is a ResponseWriter keeping the status written and the decision
// Type.Write recorded.
type recorder struct {
	http.ResponseWriter
	status   int
	decision string
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// recorderOf finds the recorder measure put in front of w, through writers
// that wrap it (Unwrap), or nil when w is not measured.
func recorderOf(w http.ResponseWriter) *recorder {
	for w != nil {
		if rec, ok := w.(*recorder); ok {
			return rec
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
	return nil
}
