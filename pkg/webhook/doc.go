// Package webhook is the transport of implicit-apiserver's webhooks: the
// admission guards' (pkg/admission) and the authorization webhook's
// (pkg/authz). It owns who may call them (Callers: kube-apiserver's client
// certificate, callers.go), the HTTP exchange of a review (Type: method,
// size bound, JSON decoding and encoding, the review's apiVersion and kind,
// review.go), and the webhooks' request metrics, implicit_admission_* and
// implicit_authorize_* (metrics.go), registered by RegisterMetrics.
//
// A decision is counted once, when the review that carries it is written
// (Type.Write, under Measure*): never recovered by decoding the answer
// again. What each webhook decides stays in its package; this one imports
// neither of them, nor anything of the server's wiring.
package webhook
