package authz

import (
	"net/http"
	"strconv"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/klog/v2"

	"github.com/implicit-dev/implicit-apiserver/pkg/webhook"
)

// Path is the authorization webhook's path on implicit-apiserver's secure port.
const Path = "/authorize"

// subjectAccessReview is what the webhook is sent.
var subjectAccessReview = webhook.Type{APIVersion: "authorization.k8s.io/v1", Kind: "SubjectAccessReview", MaxBytes: 1 << 20}

// Handler answers SubjectAccessReviews (authorization.k8s.io/v1) from a.
// Namespaced resource requests an inherited binding grants are allowed;
// everything else, errors included, gets no opinion (allowed and denied
// both false), never a denial.
func (a *Authorizer) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sar authorizationv1.SubjectAccessReview
		if !subjectAccessReview.Decode(w, r, &sar) {
			return
		}
		sar.Status = a.review(sar.Spec)
		if err := subjectAccessReview.Write(w, &sar); err != nil {
			klog.ErrorS(err, "Writing a SubjectAccessReview response")
		}
	})
}

func (a *Authorizer) review(spec authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
	ra := spec.ResourceAttributes
	if ra == nil || ra.Namespace == "" {
		decisions.WithLabelValues("no_opinion").Inc()
		return authorizationv1.SubjectAccessReviewStatus{}
	}
	d, err := a.Authorize(Attributes{
		User: spec.User, Groups: spec.Groups, Namespace: ra.Namespace, Verb: ra.Verb,
		APIGroup: ra.Group, Resource: ra.Resource, Subresource: ra.Subresource, Name: ra.Name,
	})
	switch {
	case err != nil:
		decisions.WithLabelValues("error").Inc()
		return authorizationv1.SubjectAccessReviewStatus{EvaluationError: "implicit.dev: " + err.Error()}
	case d.Allowed:
		decisions.WithLabelValues("allowed").Inc()
		return authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: d.Reason}
	default:
		decisions.WithLabelValues("no_opinion").Inc()
		return authorizationv1.SubjectAccessReviewStatus{}
	}
}

// MatchCondition is the CEL match condition of the webhook in kube-apiserver's
// AuthorizationConfiguration: only namespaced resource requests in namespaces
// that may be tenants are sent; the global namespace and the excluded ones
// inherit nothing, so the webhook could never allow there.
func MatchCondition(globalNamespace string, excluded []string) string {
	skip := append([]string{globalNamespace}, excluded...)
	quoted := make([]string, len(skip))
	for i, s := range skip {
		// Go's double-quoted escapes are CEL's too (as pkg/admission quotes).
		quoted[i] = strconv.Quote(s)
	}
	return `has(request.resourceAttributes) && request.resourceAttributes.namespace != "" && ` +
		"!(request.resourceAttributes.namespace in [" + strings.Join(quoted, ", ") + "])"
}
