package admission

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/internal/review"
)

// Paths of the guards on implicit-apiserver's secure port.
const (
	PathLocks   = "/admission/locks"
	PathShadows = "/admission/shadows"
	PathParents = "/admission/parents"
	PathFanout  = "/admission/fanout"
	// PathMaterialized guards materialized copies (materialized.go).
	PathMaterialized = "/admission/materialized"
	// PathCandidates guards candidates, PathStages the namespaces' stage
	// label (candidates.go, stages.go).
	PathCandidates = "/admission/candidates"
	PathStages     = "/admission/stages"
	// PathParentUID and PathOwnCopy are the mutating guards' (parentuid.go,
	// owncopy.go).
	PathParentUID = "/admission/parent-uid"
	PathOwnCopy   = "/admission/own-copy"
)

// Paths are every guard's path, for the authorization always-allow list:
// kube-apiserver calls webhooks without credentials.
var Paths = []string{PathLocks, PathShadows, PathParents, PathFanout, PathMaterialized, PathCandidates, PathStages, PathParentUID, PathOwnCopy}

// admissionReview is what the guards are sent; a request body is bounded
// as kube-apiserver bounds objects.
var admissionReview = review.Type{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview", MaxBytes: 6 << 20}

// synced fails until the guards' index holds every namespace and source
// (an index that can't tell is taken as synced: the unit tests' fakes).
func (g *Guards) synced() error {
	if s, ok := g.index.(interface{ Synced() error }); ok {
		return s.Synced()
	}
	return nil
}

// Handler returns the http.Handler of the guard at path.
func (g *Guards) Handler(path string) http.Handler {
	decide := map[string]func(context.Context, *admissionv1.AdmissionRequest) decision{
		PathLocks:        g.Locks,
		PathShadows:      g.Shadows,
		PathParents:      g.Parents,
		PathFanout:       g.Fanout,
		PathMaterialized: g.Materialized,
		PathCandidates:   g.Candidates,
		PathStages:       g.Stages,
		PathParentUID:    g.ParentUID,
		PathOwnCopy:      g.OwnCopy,
	}[path]
	if decide == nil {
		return http.NotFoundHandler()
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
		var d decision
		if err := g.synced(); err != nil {
			d = unavailable(fmt.Errorf("implicit-apiserver has not read every namespace and source yet: %w", err))
		} else {
			d = decide(r.Context(), in.Request)
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
