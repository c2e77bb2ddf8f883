package admission

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/pkg/accessreview"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/webhook"
)

// admissionReview is what the guards are sent; a request body is bounded
// as kube-apiserver bounds objects.
var admissionReview = webhook.Type{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview", MaxBytes: 6 << 20}

// SyncIndex tells whether the mirror holds every namespace and source yet:
// until it does, the guards answer 503 rather than decide from an empty
// mirror.
type SyncIndex interface {
	Synced() error
}

// synced fails until the mirror holds every namespace and source (no
// SyncIndex is taken as synced: the unit tests' fakes).
func (g *Guards) synced() error {
	if g.mirror.Synced == nil {
		return nil
	}
	return g.mirror.Synced.Synced()
}

// Handler returns the http.Handler of the guard at path.
func (g *Guards) Handler(path string) http.Handler {
	decide := map[string]func(context.Context, *admissionv1.AdmissionRequest) decision{
		webhookconfig.PathLocks:              g.Locks,
		webhookconfig.PathShadows:            g.Shadows,
		webhookconfig.PathParents:            g.Parents,
		webhookconfig.PathNamespaceDeletions: g.NamespaceDeletions,
		webhookconfig.PathFanout:             g.Fanout,
		webhookconfig.PathMaterialized:       g.Materialized,
		webhookconfig.PathCandidates:         g.Candidates,
		webhookconfig.PathStages:             g.Stages,
		webhookconfig.PathParentUID:          g.ParentUID,
		webhookconfig.PathOwnCopy:            g.OwnCopy,
	}[path]
	if decide == nil {
		return http.NotFoundHandler()
	}
	switch path {
	case webhookconfig.PathParents, webhookconfig.PathNamespaceDeletions, webhookconfig.PathLocks, webhookconfig.PathCandidates, webhookconfig.PathShadows, webhookconfig.PathMaterialized, webhookconfig.PathStages:
		// Decisions that read or change what the replicas' guards
		// remember take turns on the shared record (shared.go).
		decide = g.inSharedTurn(decide)
	}
	switch path {
	case webhookconfig.PathFanout, webhookconfig.PathShadows, webhookconfig.PathCandidates:
		// Their warnings are dropped when another guard denies.
		guard := decide
		decide = func(ctx context.Context, req *admissionv1.AdmissionRequest) decision {
			return g.unlessDenied(ctx, req, path, guard(ctx, req))
		}
	}
	if path == webhookconfig.PathParents {
		// One decision per tenant at a time under the parents guard's lock
		// (turns.go). The server's expiry marks alone take no turn: they
		// change no parent and only end exclusions (nothing can lose a
		// locked item by them), and a thousand exceptions ending in one
		// second must not wait a thousand turns (docs/benchmarks.md).
		turned := newTenantTurns().inTurn(decide)
		decide = func(ctx context.Context, req *admissionv1.AdmissionRequest) decision {
			if g.markOnly(req) {
				return g.Parents(ctx, req)
			}
			return turned(ctx, req)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in admissionv1.AdmissionReview
		if !admissionReview.Decode(w, r, &in) {
			return
		}
		if in.Request == nil {
			http.Error(w, "an AdmissionReview without a request", http.StatusBadRequest)
			return
		}
		ctx, cancel := g.reviewContext(r)
		defer cancel()
		var d decision
		if err := g.synced(); err != nil {
			d = unavailable(fmt.Errorf("implicit-apiserver has not read every namespace and source yet: %w", err))
		} else {
			d = refuseOverload(decide(ctx, in.Request))
		}
		if d.unavailable != nil {
			// Let the webhook's failure policy decide.
			klog.ErrorS(d.unavailable, "Admission guard cannot decide", "path", path, "resource", in.Request.Resource, "namespace", in.Request.Namespace, "name", in.Request.Name)
			http.Error(w, d.unavailable.Error(), http.StatusServiceUnavailable)
			return
		}
		resp := &admissionv1.AdmissionResponse{UID: in.Request.UID, Allowed: d.allowed, Warnings: d.warnings}
		if d.allowed && d.patch != nil {
			resp.Patch, resp.PatchType = d.patch, ptr.To(admissionv1.PatchTypeJSONPatch)
		}
		if !d.allowed {
			resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: d.code, Reason: metav1.StatusReasonForbidden, Message: d.message}
			klog.V(2).InfoS("Admission denied", "path", path, "user", in.Request.UserInfo.Username, "resource", in.Request.Resource, "namespace", in.Request.Namespace, "name", in.Request.Name, "reason", d.message)
		}
		out := admissionv1.AdmissionReview{TypeMeta: in.TypeMeta, Response: resp}
		if err := admissionReview.Write(w, &out); err != nil {
			klog.ErrorS(err, "Writing an AdmissionReview response", "path", path)
		}
	})
}

// reviewContext is the context one admission review is decided in: it ends
// when kube-apiserver stops waiting (the webhook's timeout, which it sends
// as the timeout query parameter), and it counts the access reviews the
// decision asks when the authorizer caps them (accessreview.Reviewer).
func (g *Guards) reviewContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := r.Context(), context.CancelFunc(func() {})
	if t, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && t > 0 {
		ctx, cancel = context.WithTimeout(ctx, t)
	}
	if b, ok := g.authz.(interface {
		Budget(context.Context) context.Context
	}); ok {
		ctx = b.Budget(ctx)
	}
	return ctx, cancel
}

// refuseOverload turns a decision that could not be made because the
// requester asked too much into a refusal of that request, which says so:
// too many access reviews for one request (a retry asks as many), or too
// many of the same requester's waiting (a retry later may pass). Left to
// the failure policy, a webhook configured with Ignore would admit them.
func refuseOverload(d decision) decision {
	switch {
	case d.unavailable == nil:
		return d
	case errors.Is(d.unavailable, accessreview.ErrTooManyReviews):
		return deny("refused: deciding this request needs more permission checks than one request may ask (%v); "+
			"a grant without resourceNames (e.g. the %q or %q verb on every object of the kind in the source namespace) answers them at once", d.unavailable, UnlockVerb, ApproveVerb)
	case errors.Is(d.unavailable, accessreview.ErrTooManyWaiting):
		d = deny("refused for now: %v; retry later", d.unavailable)
		d.code = http.StatusTooManyRequests
		return d
	}
	return d
}

// SARAuthorizer asks the host cluster with SubjectAccessReviews.
type SARAuthorizer struct {
	Client authorizationclient.SubjectAccessReviewInterface
}

// Allowed implements Authorizer.
func (a SARAuthorizer) Allowed(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	if a.Client == nil {
		return false, "", fmt.Errorf("no client to ask the host cluster for SubjectAccessReviews")
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.Client.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &attrs,
		User:               user.Username,
		Groups:             user.Groups,
		Extra:              extra,
		UID:                user.UID,
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, "", err
	}
	return sar.Status.Allowed, sar.Status.Reason, nil
}
