package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// A write to a materialized copy by anyone but the server makes the object
// its writer's own: OwnCopy (mutating) removes the copy label and the
// provenance the server wrote at admission, and Materialized (validating)
// then judges the result as a shadow of the inherited item: allowed for
// whoever may create the object there, refused for a locked item. The
// materializer writes only objects that carry the label, under
// resourceVersion preconditions, so it backs off from the object at once:
// it is a local source now, which the view shows as local (and as parent
// in the namespaces below). So a parent shadows a materialized item for its
// subtree by editing (kubectl apply) its copy, with no race.

// OwnCopy is the mutating guard of writes to copies: an UPDATE of a
// materialized copy by anyone but the server's own identity is patched to
// drop the label implicit.dev/materialized and the provenance labels and
// annotations the server wrote (v1alpha1.ProvenanceLabels,
// v1alpha1.ProvenanceAnnotations). The server's own writes are left as they
// are. It decides nothing: the validating guards judge the result.
func (g *Guards) OwnCopy(_ context.Context, req *admissionv1.AdmissionRequest) decision {
	s, ok, err := g.source(req)
	if !ok || req.Operation != admissionv1.Update {
		return allow()
	}
	if err != nil {
		return deny("%v", err)
	}
	if !materialized(s.old) || s.obj == nil {
		return allow()
	}
	id := g.serverIdentity()
	if id == "" {
		return unavailable(errors.New("implicit-apiserver's own identity is not known yet"))
	}
	if req.UserInfo.Username == id {
		return allow()
	}
	patch, err := ownCopyPatch(s.obj)
	if err != nil {
		return deny("writing the patch: %v", err)
	}
	if patch == nil {
		return allow()
	}
	return decision{allowed: true, patch: patch}
}

// ownCopyPatch removes from obj the copy label and the provenance labels
// and annotations it carries; nil when it carries none.
func ownCopyPatch(obj *unstructured.Unstructured) ([]byte, error) {
	var ops []map[string]any
	remove := func(field string, present map[string]string, keys ...string) {
		for _, k := range keys {
			if _, ok := present[k]; ok {
				ops = append(ops, map[string]any{"op": "remove", "path": "/metadata/" + field + "/" + jsonPointerEscape(k)})
			}
		}
	}
	remove("labels", obj.GetLabels(), append([]string{v1alpha1.LabelMaterialized}, v1alpha1.ProvenanceLabels...)...)
	remove("annotations", obj.GetAnnotations(), v1alpha1.ProvenanceAnnotations...)
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}

// jsonPointerEscape escapes a key for a JSON pointer (RFC 6901).
func jsonPointerEscape(key string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// madeOwn judges an UPDATE by anyone but the server that makes a copy its
// writer's own (the label removed, by OwnCopy or by the writer): the
// object becomes a local source that shadows the inherited item in its
// namespace and the namespaces below, so it is judged as creating that
// shadow would be. Refused when the item is locked (whoever holds unlock on
// the source can unlock or change it instead: a copy is never the way
// around a lock); otherwise it needs create on the object where it is, and
// unlock there too when the write locks it, as the lock guard asks of a
// locked create. A write that makes the object a candidate at once is
// refused: the candidates guard leaves copies alone.
func (g *Guards) madeOwn(ctx context.Context, req *admissionv1.AdmissionRequest, s source) decision {
	srcNS := s.old.GetLabels()[v1alpha1.LabelSourceNamespace]
	from := fmt.Sprintf("%s/%s", srcNS, s.name)
	if srcNS == "" {
		from = "an inherited item"
	}
	if lockedBy, err := g.copyLockedBy(s, srcNS); err != nil {
		return unavailable(err)
	} else if lockedBy != "" {
		return deny("%s is a materialized copy of the locked %s (%s: \"true\"): this write would make it the namespace's own "+
			"and shadow the locked item, and a locked item can't be shadowed from below; its owners can unlock or change it",
			s, lockedBy, v1alpha1.AnnotationLocked)
	}
	if merge.IsCandidate(s.obj.GetAnnotations()) {
		return deny("%s is a materialized copy of %s: a write that makes it the namespace's own can't make it a candidate (%s, %s, %s) as well; make it your own first",
			s, from, v1alpha1.AnnotationCandidateFor, v1alpha1.AnnotationCanarySelector, v1alpha1.AnnotationCanaryClusters)
	}
	need := []string{"create"}
	if locked(s.obj) {
		need = append(need, UnlockVerb)
	}
	for _, v := range need {
		allowed, reason, err := g.authz.Allowed(ctx, req.UserInfo, authorizationv1.ResourceAttributes{
			Verb: v, Group: s.gr.Group, Resource: s.gr.Resource, Namespace: s.namespace, Name: s.name,
		})
		if err != nil {
			return unavailable(fmt.Errorf("checking the %s permission: %w", v, err))
		}
		if !allowed {
			msg := fmt.Sprintf("%s is a materialized copy of %s: this write would make it the namespace's own, which needs the %q permission on it (RBAC verb %q on %s, resourceNames [%s], in namespace %s)",
				s, from, v, v, s.gr, s.name, s.namespace)
			if reason != "" {
				msg += ": " + reason
			}
			return deny("%s", msg)
		}
	}
	return allow(fmt.Sprintf("implicit.dev: %s was a materialized copy of %s: this write made it the namespace's own (label %s removed); "+
		"it shadows the inherited item here and in the namespaces below, and implicit-apiserver no longer writes it",
		s, from, v1alpha1.LabelMaterialized))
}

// copyLockedBy names the locked source a copy's item comes from, "" when
// it is not locked: the copy's source (its labels say which), the copy
// itself (it carries its source's lock), or the item the namespace's view
// inherits under that name.
func (g *Guards) copyLockedBy(s source, srcNS string) (string, error) {
	scope := s.old.GetLabels()[v1alpha1.LabelScope]
	if srcNS != "" {
		sourceLocked, err := g.mirror.Sources.SourceLocked(s.resource, srcNS, s.name)
		if err != nil {
			return "", fmt.Errorf("reading whether the source of %s is locked: %w", s, err)
		}
		if sourceLocked || locked(s.old) {
			return fmt.Sprintf("%s source %s/%s", scope, srcNS, s.name), nil
		}
	}
	// The mirror, and what the guards admitted a moment ago (a lock, a
	// namespace change) that it may not show yet.
	inh, found, err := g.lockedInherited(s)
	if err != nil {
		return "", fmt.Errorf("reading what %s inherits: %w", s.namespace, err)
	}
	if found {
		return fmt.Sprintf("%s source %s/%s", inh.Scope, inh.Item.Namespace, inh.Item.Name), nil
	}
	if srcNS == "" && locked(s.old) {
		return "source of " + s.name, nil
	}
	return "", nil
}
