package admission

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// ApproveVerb is the custom RBAC verb that allows approving an exception of
// a source's items, asked on the source, never in the exception's
// namespace.
const ApproveVerb = "approve"

// exceptionApprovals judges implicit.dev/exception-approvals when the
// request sets or changes it: a malformed value is refused, and so is each
// approval added or changed that exceptionApproval refuses. Removing one
// is allowed: it only takes an exception out of effect.
func (g *Guards) exceptionApprovals(ctx context.Context, req *admissionv1.AdmissionRequest, old, obj *unstructured.Unstructured) decision {
	key := v1alpha1.AnnotationExceptionApprovals
	value, ok := annotation(obj, key)
	if !ok || !annotationChanged(old, obj, key) {
		return allow()
	}
	approvals, err := merge.ParseExceptionApprovals(value)
	if err != nil {
		return deny("namespace %s: %v", obj.GetName(), err)
	}
	before := map[string]v1alpha1.ExceptionApproval{}
	if prev, had := annotation(old, key); had {
		before, _ = merge.ParseExceptionApprovals(prev)
	}
	specs := map[string]v1alpha1.ExceptionSpec{}
	if v, ok := annotation(obj, v1alpha1.AnnotationExceptions); ok {
		list, _ := merge.ParseExceptions(v)
		for _, s := range list {
			if _, seen := specs[s.Name]; !seen {
				specs[s.Name] = s
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(approvals)) {
		a := approvals[name]
		if prev, had := before[name]; had && reflect.DeepEqual(prev, a) {
			continue
		}
		spec, found := specs[name]
		if d := g.exceptionApproval(ctx, req, obj.GetName(), name, a, spec, found); !d.allowed {
			return d
		}
	}
	return allow()
}

// exceptionApproval judges one approval added or changed: written by its
// approver, who is not the exception's requester, of the exception's
// current version, naming the sources it covers, on each of which the
// approver may approve every item the exception names (a
// SubjectAccessReview with verb approve on the source's group, resource,
// namespace and name, the name empty for <resource>/*). A hub source
// ("<cluster>/<namespace>") is asked of the hub's RBAC, for the same user.
func (g *Guards) exceptionApproval(ctx context.Context, req *admissionv1.AdmissionRequest, namespace, name string, a v1alpha1.ExceptionApproval, spec v1alpha1.ExceptionSpec, found bool) decision {
	user := req.UserInfo.Username
	what := fmt.Sprintf("namespace %s: the approval of exception %q", namespace, name)
	switch {
	case a.By != user:
		return deny("%s: by must be the user writing it (%s), not %q", what, user, a.By)
	case !found:
		return deny("%s: %s declares no exception %q to approve", what, v1alpha1.AnnotationExceptions, name)
	case spec.RequestedBy == user:
		return deny("%s: the requester can't approve their own request (%s requested it)", what, user)
	case a.Digest != merge.ExceptionDigest(spec):
		return deny("%s: digest %q is not the exception's current version (%s): an approval approves the version it names", what, a.Digest, merge.ExceptionDigest(spec))
	case len(a.Sources) == 0:
		return deny("%s: sources must name the namespaces whose sources' items it covers", what)
	}
	type where struct {
		namespace string
		authz     Authorizer
		at        string // how messages name the source's cluster
	}
	places := make([]where, 0, len(a.Sources))
	for _, src := range a.Sources {
		cluster, namespace, hubSource := strings.Cut(src, "/")
		switch {
		case !hubSource && src != "":
			places = append(places, where{namespace: src, authz: g.authz})
		case hubSource && g.hub != nil && cluster == g.hubCluster && namespace != "":
			places = append(places, where{namespace: namespace, authz: g.hub, at: " of hub cluster " + cluster})
		case hubSource:
			return deny("%s: source %s: this cluster reads no hub cluster %q: its approvals are decided on the hub this server reads global sources from", what, src, cluster)
		default:
			return deny("%s: sources: an empty namespace", what)
		}
	}
	var missing []string
	// Each question once: two entries of one kind share the first.
	type question struct {
		hub   bool
		attrs authorizationv1.ResourceAttributes
	}
	answered := map[question]bool{}
	allowed := func(at where, attrs authorizationv1.ResourceAttributes) (bool, error) {
		q := question{hub: at.at != "", attrs: attrs}
		if ok, seen := answered[q]; seen {
			return ok, nil
		}
		ok, _, err := at.authz.Allowed(ctx, req.UserInfo, attrs)
		answered[q] = ok
		return ok, err
	}
	for _, src := range places {
		for _, entry := range spec.Exclude {
			ex, errs := merge.ParseExclusions(entry)
			if len(errs) > 0 || len(ex) != 1 {
				return deny("%s: exception %q is malformed: %s", what, name, entry)
			}
			gr, ok := g.sourceOf(ex[0].Resource)
			if !ok {
				return deny("%s: implicit.dev serves no view %q", what, ex[0].Resource)
			}
			attrs := authorizationv1.ResourceAttributes{Verb: ApproveVerb, Group: gr.Group, Resource: gr.Resource, Namespace: src.namespace}
			// A grant without resourceNames (an org admin's) answers for
			// every name at once; otherwise the name is asked.
			all, err := allowed(src, attrs)
			if err != nil {
				return unavailable(fmt.Errorf("checking the approve permission: %w", err))
			}
			if all {
				continue
			}
			if ex[0].Name != "*" {
				attrs.Name = ex[0].Name
				one, err := allowed(src, attrs)
				if err != nil {
					return unavailable(fmt.Errorf("checking the approve permission: %w", err))
				}
				if one {
					continue
				}
			}
			missing = append(missing, fmt.Sprintf("%s in namespace %s%s (%s)", gr, src.namespace, src.at, ex[0]))
		}
	}
	if len(missing) > 0 {
		return deny("%s: approving needs the %q permission on each source it covers (RBAC verb %q on the source, in its namespace), missing: %s",
			what, ApproveVerb, ApproveVerb, strings.Join(firstOf(missing), "; "))
	}
	return allow()
}
