package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// CandidateIndex is what the candidates guard asks of the mirror (and the
// lock guard, of a source's open candidates): a namespace's candidates,
// the stable source one stands in for, and how far a candidate reaches.
type CandidateIndex interface {
	// Candidates lists the candidates among namespace's sources of
	// resource, sorted by name.
	Candidates(resource, namespace string) ([]whatif.CandidateSource, error)
	// SourceObject is the object of the source namespace/name.
	SourceObject(resource, namespace, name string) (any, bool, error)
	// CandidateReach counts the namespaces that would inherit c's stable
	// name from namespace with the candidate obj standing in for it (of),
	// and those of them whose implicit.dev/stage c's selector matches
	// (reached).
	CandidateReach(resource, namespace string, obj *unstructured.Unstructured, c *merge.Candidate) (reached, of int, err error)
}

// immutableFields are, per source group/resource, the fields its API server
// refuses to change on an existing object. A candidate stands in for its
// stable source in the views, so it may not hold another value there: what
// a namespace sees must be a version the source itself could become.
var immutableFields = map[schema.GroupResource][][]string{
	{Group: rbacv1.GroupName, Resource: "rolebindings"}: {{"roleRef"}},
}

// ImmutableFieldChanged returns the first field immutable on gr's objects
// (immutableFields) that before and after hold differently, dotted: an
// UPDATE that kube-apiserver refuses before any guard is asked (pkg/offline
// predicts it so). ok is false when none differs.
func ImmutableFieldChanged(gr schema.GroupResource, before, after map[string]any) (field string, ok bool, err error) {
	for _, path := range immutableFields[gr] {
		same, err := sameField(before, after, path)
		if err != nil {
			return "", false, err
		}
		if !same {
			return strings.Join(path, "."), true, nil
		}
	}
	return "", false, nil
}

// candidateOf parses the candidate annotations of u: nil when u is nil or
// is no candidate.
func candidateOf(u *unstructured.Unstructured) (*merge.Candidate, error) {
	if u == nil {
		return nil, nil
	}
	return merge.ParseCandidate(u.GetName(), u.GetAnnotations())
}

// candidateTouched reports whether a request's old or new object is a
// candidate: the candidates guard, not the fan-out one, warns of its reach.
func candidateTouched(s source) bool {
	for _, u := range []*unstructured.Unstructured{s.old, s.obj} {
		if c, _ := candidateOf(u); c != nil {
			return true
		}
	}
	return false
}

// Candidates guards candidates (implicit.dev/candidate-for,
// implicit.dev/canary-selector), the staged versions of a source:
//
//   - a candidate created or changed must be well formed (merge.ParseCandidate's
//     message is the denial);
//   - a stable source has at most one candidate: a second is refused,
//     naming the first;
//   - a candidate may not change a field immutable on its stable source (a
//     RoleBinding's roleRef);
//   - creating, changing or deleting a candidate of a locked source needs
//     unlock on that source, as changing the source itself does (the status
//     subresource included);
//   - creating or changing a candidate warns how many of the namespaces
//     that inherit the stable name from its namespace it reaches; deleting
//     one, how many it stops reaching.
func (g *Guards) Candidates(ctx context.Context, req *admissionv1.AdmissionRequest) decision {
	s, ok, err := g.source(req, webhookconfig.SubresourceStatus)
	if !ok {
		return allow()
	}
	if err != nil {
		return deny("%v", err)
	}
	if copyTouched(s) {
		return allow() // a copy is no source: Materialized guards it
	}
	oldC, _ := candidateOf(s.old)
	newC, newErr := candidateOf(s.obj)
	if oldC == nil && newC == nil {
		return allow()
	}
	writes := s.subresource == "" && (req.Operation == admissionv1.Create || req.Operation == admissionv1.Update)
	if writes && newC != nil && newErr != nil {
		return deny("%s is a malformed candidate: %v", s, newErr)
	}
	if d := g.candidateLocks(ctx, req, s, oldC, newC); !d.allowed {
		return d
	}
	if !writes {
		if req.Operation == admissionv1.Delete && s.subresource == "" && oldC.For != "" {
			// What the mirror shows of the candidate being deleted has
			// landed: once the mirror no longer shows it, it is forgotten.
			if others, err := g.mirror.Candidates.Candidates(s.resource, s.namespace); err == nil {
				g.recent.observe(recentKey{s.resource, s.namespace, oldC.For}, func(name string) bool {
					return slices.ContainsFunc(others, func(o whatif.CandidateSource) bool { return o.Name == name })
				})
			}
			return g.candidateReach(s, s.old, oldC, true)
		}
		return allow()
	}
	if newC == nil {
		return allow() // no longer a candidate: an ordinary source from now on
	}
	others, err := g.mirror.Candidates.Candidates(s.resource, s.namespace)
	if err != nil {
		return unavailable(fmt.Errorf("reading the candidates of namespace %s: %w", s.namespace, err))
	}
	for _, o := range others {
		if o.For == newC.For && o.Name != s.name {
			return deny("%s: %s %q already has the candidate %q in namespace %q: a stable source has at most one candidate; edit %q (or delete it first)",
				s, s.gr, newC.For, o.Name, s.namespace, o.Name)
		}
	}
	// A candidate admitted a moment ago counts before the mirror shows it
	// (as for the lock guard's openCandidate): two created back to back
	// must not each pass because the mirror shows neither. Remembered until
	// the mirror shows it land and go, or for at most assumeFor.
	inMirror := func(name string) bool {
		return slices.ContainsFunc(others, func(o whatif.CandidateSource) bool { return o.Name == name && o.For == newC.For })
	}
	if c, found := g.recent.observe(recentKey{s.resource, s.namespace, newC.For}, inMirror); found && c.name != s.name {
		return deny("%s: %s %q already has the candidate %q in namespace %q, admitted a moment ago: a stable source has at most one candidate; edit %q (or delete it first). If %q does not exist (another webhook refused its write, or it was deleted a moment ago), try again in %s",
			s, s.gr, newC.For, c.name, s.namespace, c.name, c.name, assumeFor)
	}
	if d := g.candidateImmutable(s, newC); !d.allowed {
		return d
	}
	if req.DryRun == nil || !*req.DryRun {
		g.recent.candidate(recentKey{s.resource, s.namespace, newC.For}, s.name, locked(s.obj))
	}
	return g.candidateReach(s, s.obj, newC, false)
}

// candidateLocks checks that whoever creates, changes or deletes a candidate
// of a locked source may unlock it: the stable source the candidate stages
// before the request and the one it stages after.
func (g *Guards) candidateLocks(ctx context.Context, req *admissionv1.AdmissionRequest, s source, oldC, newC *merge.Candidate) decision {
	var stables []string
	for _, c := range []*merge.Candidate{oldC, newC} {
		if c != nil && c.For != "" && !strings.Contains(c.For, "/") && (len(stables) == 0 || stables[0] != c.For) {
			stables = append(stables, c.For)
		}
	}
	for _, stable := range stables {
		// A lock admitted a moment ago counts before the mirror shows it.
		// Asked first: it is forgotten once the mirror shows its write
		// settled, so the mirror read after it shows at least that (read
		// before, it could show the source unlocked and the memory then
		// forget the lock that had just landed).
		recentlyLocked := g.recent.locked(recentKey{s.resource, s.namespace, stable})
		isLocked, err := g.mirror.Sources.SourceLocked(s.resource, s.namespace, stable)
		if err != nil {
			return unavailable(fmt.Errorf("reading whether %s %s/%s is locked: %w", s.gr, s.namespace, stable, err))
		}
		isLocked = isLocked || recentlyLocked
		if !isLocked {
			continue
		}
		// A candidate goes with its namespace, as a locked source does.
		if req.Operation == admissionv1.Delete {
			terminating, err := g.namespaceTerminating(ctx, s.namespace)
			if err != nil {
				return unavailable(fmt.Errorf("reading whether namespace %s is being deleted: %w", s.namespace, err))
			}
			if terminating {
				return allow()
			}
		}
		allowed, reason, err := g.authz.Allowed(ctx, req.UserInfo, authorizationv1.ResourceAttributes{
			Verb: UnlockVerb, Group: s.gr.Group, Resource: s.gr.Resource, Namespace: s.namespace, Name: stable,
		})
		if err != nil {
			return unavailable(fmt.Errorf("checking the unlock permission: %w", err))
		}
		if allowed {
			continue
		}
		what := "changing"
		switch {
		case s.subresource != "":
			what = fmt.Sprintf("updating the %s subresource of", s.subresource)
		case req.Operation == admissionv1.Create:
			what = "creating"
		case req.Operation == admissionv1.Delete:
			what = "deleting"
		}
		msg := fmt.Sprintf("%s is a candidate for %s %q, which is locked (%s: \"true\"): %s a candidate of a locked source needs the %q permission on that source (RBAC verb %q on %s, resourceNames [%s], in namespace %s)",
			s, s.gr, stable, v1alpha1.AnnotationLocked, what, UnlockVerb, UnlockVerb, s.gr, stable, s.namespace)
		if reason != "" {
			msg += ": " + reason
		}
		return deny("%s", msg)
	}
	return allow()
}

// candidateImmutable refuses a candidate that changes a field immutable on
// its stable source, when that source exists.
func (g *Guards) candidateImmutable(s source, c *merge.Candidate) decision {
	fields := immutableFields[s.gr]
	if len(fields) == 0 {
		return allow()
	}
	stable, found, err := g.mirror.Candidates.SourceObject(s.resource, s.namespace, c.For)
	if err != nil {
		return unavailable(fmt.Errorf("reading %s %s/%s: %w", s.gr, s.namespace, c.For, err))
	}
	if !found {
		return allow() // a staged creation: nothing to differ from
	}
	content, err := contentOf(stable)
	if err != nil {
		return unavailable(fmt.Errorf("reading %s %s/%s: %w", s.gr, s.namespace, c.For, err))
	}
	for _, path := range fields {
		same, err := sameField(content, s.obj.Object, path)
		if err != nil {
			return deny("%s: comparing %s with %s %q: %v", s, strings.Join(path, "."), s.gr, c.For, err)
		}
		if !same {
			return deny("%s is a candidate for %s %q but changes %s, which is immutable on it: a candidate may only hold a version the source itself could become. Stage a new object under a new name instead (a candidate staging its creation), then delete %q once it is promoted",
				s, s.gr, c.For, strings.Join(path, "."), c.For)
		}
	}
	return allow()
}

// contentOf returns obj, a mirrored source object, as unstructured content.
func contentOf(obj any) (map[string]any, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return o.Object, nil
	case runtime.Object:
		return runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	}
	return nil, fmt.Errorf("unexpected source object %T", obj)
}

// sameField reports whether a and b hold the same value at path (both
// without it included). Values are compared as JSON, so that numbers read
// from typed objects and from JSON compare alike.
func sameField(a, b map[string]any, path []string) (bool, error) {
	va, foundA, err := unstructured.NestedFieldNoCopy(a, path...)
	if err != nil {
		return false, err
	}
	vb, foundB, err := unstructured.NestedFieldNoCopy(b, path...)
	if err != nil {
		return false, err
	}
	if foundA != foundB {
		return false, nil
	}
	ja, err := json.Marshal(va)
	if err != nil {
		return false, err
	}
	jb, err := json.Marshal(vb)
	if err != nil {
		return false, err
	}
	return string(ja) == string(jb), nil
}

// candidateReach warns how many namespaces candidate c (the object u)
// reaches. A warning is never worth failing a write for: errors give none.
func (g *Guards) candidateReach(s source, u *unstructured.Unstructured, c *merge.Candidate, deleted bool) decision {
	n, m, err := g.mirror.Candidates.CandidateReach(s.resource, s.namespace, u, c)
	if err != nil {
		return allow()
	}
	if deleted {
		return allow(candidateDeletedWarning(n, m))
	}
	return allow(candidateWarning(n, m))
}

// candidateWarning is the warning kubectl prints when a candidate is
// created or changed: it reaches n of the m namespaces that inherit its
// stable name from its namespace.
func candidateWarning(n, m int) string {
	return fmt.Sprintf("implicit.dev: this candidate reaches %d of %d namespaces", n, m)
}

// candidateDeletedWarning is the warning of a candidate's deletion (an
// abort, or the second step of a promotion).
func candidateDeletedWarning(n, m int) string {
	return fmt.Sprintf("implicit.dev: this candidate reached %d of %d namespaces; they see the stable version again", n, m)
}
