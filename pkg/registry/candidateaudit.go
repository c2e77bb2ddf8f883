package registry

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

// AuditReader reports what this replica's authorization webhook recorded
// of the candidates of a stable RoleBinding: *authz.Authorizer.
type AuditReader interface {
	CandidateAudits(namespace, stable string) (authz.AuditReport, error)
}

// CandidateAuditStorage serves candidateaudits.implicit.dev, a create-only
// review: the requests the webhook answered that a candidate RoleBinding,
// outside its canaries, would have answered otherwise (pkg/authz,
// audit.go). Besides create on candidateaudits, the requester needs list on
// the namespace's RoleBindings (where the candidates are: whoever may read
// the candidate and the binding it changes) for the counts. The keys and
// samples name users, what they did and where, anywhere the candidate
// reaches, so they are answered only to a requester who may list
// RoleBindings in every namespace (an org admin); others get the counts
// and a note saying why the rest is left out.
type CandidateAuditStorage struct {
	review
	src   AuditReader
	authz authorizer.UnconditionalAuthorizer
	// notSynced reports whether an error of src means the views are not
	// read yet (answered 503).
	notSynced func(error) bool
}

var (
	_ rest.Storage              = &CandidateAuditStorage{}
	_ rest.Creater              = &CandidateAuditStorage{}
	_ rest.Scoper               = &CandidateAuditStorage{}
	_ rest.KindProvider         = &CandidateAuditStorage{}
	_ rest.SingularNameProvider = &CandidateAuditStorage{}
)

// NewCandidateAuditStorage returns the storage of candidateaudits.
func NewCandidateAuditStorage(src AuditReader, authz authorizer.UnconditionalAuthorizer, notSynced func(error) bool) *CandidateAuditStorage {
	return &CandidateAuditStorage{review: review{newObject: func() runtime.Object { return &v1alpha1.CandidateAudit{} }, kind: "CandidateAudit", singular: "candidateaudit"}, src: src, authz: authz, notSynced: notSynced}
}

// auditedResource is the only source resource whose candidates are audited.
var auditedResource = schema.GroupResource{Group: rbacv1.GroupName, Resource: "rolebindings"}

// Create implements rest.Creater: it answers the review in the status.
func (s *CandidateAuditStorage) Create(ctx context.Context, obj runtime.Object, validate rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	in, ok := obj.(*v1alpha1.CandidateAudit)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a CandidateAudit: %T", obj))
	}
	ns, ok := genericapirequest.NamespaceFrom(ctx)
	if !ok || ns == "" {
		return nil, apierrors.NewBadRequest("a namespace is required")
	}
	if in.Spec.Name == "" {
		return nil, apierrors.NewBadRequest("spec.name must name the stable source")
	}
	switch in.Spec.Resource {
	case "", auditedResource.Resource, auditedResource.String():
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.resource %q: only candidates of %s are audited: they are what the authorization webhook decides with "+
			"(a candidate Role is not applied, a binding's Role being resolved in the binding's own namespace)", in.Spec.Resource, auditedResource))
	}
	if err := allowed(ctx, s.authz, auditedResource, "list", ns, ""); err != nil {
		return nil, err
	}
	if validate != nil {
		if err := validate(ctx, obj); err != nil {
			return nil, err
		}
	}
	rep, err := s.src.CandidateAudits(ns, in.Spec.Name)
	if err != nil {
		if s.notSynced != nil && s.notSynced(err) {
			return nil, apierrors.NewServiceUnavailable("implicit-apiserver is starting and has not read its sources yet")
		}
		return nil, err
	}
	out := in.DeepCopy()
	out.Namespace = ns
	out.ManagedFields = nil
	out.Spec.Resource = auditedResource.String()
	// The keys and samples name namespaces anywhere the candidate reaches.
	everywhere := allowed(ctx, s.authz, auditedResource, "list", "", "") == nil
	out.Status = v1alpha1.CandidateAuditStatus{
		Replica:          rep.Replica,
		ReplicaStartTime: metav1.NewTime(rep.Started),
		Scope: fmt.Sprintf("the requests replica %s answered since %s; each replica records its own share of the webhook's requests",
			rep.Replica, rep.Started.UTC().Format("2006-01-02T15:04:05Z")),
	}
	for _, c := range rep.Candidates {
		r := candidateAuditRecord(c)
		if !everywhere && (len(r.Keys) > 0 || len(r.Samples) > 0) {
			r.Keys, r.Samples = nil, nil
			r.OthersWouldDeny, r.OthersWouldAllow = r.WouldDeny, r.WouldAllow
			r.Withheld = "the keys and samples name users and namespaces anywhere the candidate reaches: they need list on " +
				auditedResource.String() + " in every namespace"
		}
		out.Status.Candidates = append(out.Status.Candidates, r)
	}
	return out, nil
}

func candidateAuditRecord(c authz.CandidateAudit) v1alpha1.CandidateAuditRecord {
	r := v1alpha1.CandidateAuditRecord{
		Name: c.Candidate.Name, UID: string(c.Candidate.UID), Problem: c.Problem,
		Judged: c.Judged, WouldDeny: c.WouldDeny, WouldAllow: c.WouldAllow,
		OthersWouldDeny: c.OthersWouldDeny, OthersWouldAllow: c.OthersWouldAllow,
	}
	if !c.Since.IsZero() {
		t := metav1.NewTime(c.Since)
		r.Since = &t
	}
	for _, k := range c.Keys {
		r.Keys = append(r.Keys, v1alpha1.AuditKeyCount{
			Namespace: k.Namespace, User: k.User, Verb: k.Verb, Resource: k.Resource, Direction: string(k.Direction), Count: k.Count,
		})
	}
	for _, s := range c.Samples {
		r.Samples = append(r.Samples, v1alpha1.AuditSample{
			Time: metav1.NewTime(s.Time), Namespace: s.Namespace, User: s.User, Groups: s.Groups, Verb: s.Verb,
			Resource: s.Resource, Name: s.Name, Direction: string(s.Direction), Given: s.Given, Candidate: s.Candidate,
		})
	}
	return r
}
