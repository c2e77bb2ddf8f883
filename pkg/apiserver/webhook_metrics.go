package apiserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"k8s.io/component-base/metrics"

	// rest_client_* metrics of the server's calls to the host (and hub)
	// cluster, as metrics-server and kube-controller-manager register them.
	_ "k8s.io/component-base/metrics/prometheus/restclient"
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

// Decisions, as the metrics label them.
const (
	decisionAllowed   = "allowed"
	decisionDenied    = "denied"
	decisionNoOpinion = "no_opinion"
	decisionError     = "error"
)

// guardLabel is the guard label of an admission path: "locks" for /admission/locks.
func guardLabel(path string) string {
	return strings.TrimPrefix(path, "/admission/")
}

// measureAdmission counts h's answers, served at path, in
// implicit_admission_*: it reads the decision from the AdmissionReview h
// writes.
func measureAdmission(path string, h http.Handler) http.Handler {
	guard := guardLabel(path)
	duration := admissionDuration.WithLabelValues(guard)
	counters := map[string]metrics.CounterMetric{}
	for _, d := range []string{decisionAllowed, decisionDenied, decisionError} {
		counters[d] = admissionDecisions.WithLabelValues(guard, d)
	}
	return measure(h, func(elapsed time.Duration, status int, body []byte) {
		duration.Observe(elapsed.Seconds())
		counters[admissionDecision(status, body)].Inc()
	})
}

// measureAuthorize counts h's answers in implicit_authorize_*: it reads
// the decision from the SubjectAccessReview h writes.
func measureAuthorize(h http.Handler) http.Handler {
	return measure(h, func(elapsed time.Duration, status int, body []byte) {
		authorizeDuration.Observe(elapsed.Seconds())
		authorizeDecisions.WithLabelValues(authorizeDecision(status, body)).Inc()
	})
}

func admissionDecision(status int, body []byte) string {
	var review struct {
		Response *struct {
			Allowed bool `json:"allowed"`
		} `json:"response"`
	}
	switch {
	case status != http.StatusOK || json.Unmarshal(body, &review) != nil || review.Response == nil:
		return decisionError
	case review.Response.Allowed:
		return decisionAllowed
	default:
		return decisionDenied
	}
}

func authorizeDecision(status int, body []byte) string {
	var review struct {
		Status *struct {
			Allowed         bool   `json:"allowed"`
			Denied          bool   `json:"denied"`
			EvaluationError string `json:"evaluationError"`
		} `json:"status"`
	}
	switch {
	case status != http.StatusOK || json.Unmarshal(body, &review) != nil:
		return decisionError
	case review.Status == nil:
		// An empty status is omitted: no opinion.
		return decisionNoOpinion
	case review.Status.EvaluationError != "":
		return decisionError
	case review.Status.Allowed:
		return decisionAllowed
	case review.Status.Denied:
		return decisionDenied
	default:
		return decisionNoOpinion
	}
}

// measure serves h, keeping the status and body it writes, and hands them
// to done with the time h took. The reviews written are small (a review
// request is bounded, and the answer echoes little more), and the handlers
// encode them whole anyway.
func measure(h http.Handler, done func(elapsed time.Duration, status int, body []byte)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		done(time.Since(start), status, rec.body.Bytes())
	})
}

// recorder is a ResponseWriter keeping what is written: the status, and
// the body of a successful answer.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
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
	if r.status == http.StatusOK {
		r.body.Write(b)
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
