package admission

import (
	"context"
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// SetServerIdentity names the server's own user: the only one that may
// create materialized copies (label implicit.dev/materialized) or set the
// label, and whose writes to a copy keep it (OwnCopy). Until it is set, the
// materialized and own-copy guards can't decide (503: the failure policy
// applies).
func (g *Guards) SetServerIdentity(username string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.identity = username
}

func (g *Guards) serverIdentity() string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.identity
}

func (g *Guards) isMaterialized(resource string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.materialized[resource]
}

func materialized(u *unstructured.Unstructured) bool {
	return u != nil && v1alpha1.IsMaterialized(u.GetLabels())
}

// copyTouched reports whether a request's old or new object is a
// materialized copy: the other source guards leave it to Materialized, as a
// copy is never a source.
func copyTouched(s source) bool { return materialized(s.old) || materialized(s.obj) }

// Materialized guards the materialized copies: only the server's own
// identity may set the label implicit.dev/materialized (a forged one would
// hide a tenant's object from every view). Anyone else's update that
// removes it (OwnCopy removes it from every such update) makes the copy
// the writer's own, judged as a shadow of the inherited item would be
// (madeOwn: refused for a locked item). Anyone else's change that keeps
// the label (through the status subresource, or without the OwnCopy
// webhook) or deletion of a copy needs what the same change of its source
// needs (update or delete on the source, and unlock when the source is
// locked), and is then allowed with a warning: the server writes the copy
// back as the view says. A copy goes with its namespace.
func (g *Guards) Materialized(ctx context.Context, req *admissionv1.AdmissionRequest) decision {
	s, ok, err := g.source(req, webhookconfig.SubresourceStatus)
	if !ok {
		return allow()
	}
	if err != nil {
		return deny("%v", err)
	}
	was, is := materialized(s.old), materialized(s.obj)
	if !was && !is {
		return allow()
	}
	id := g.serverIdentity()
	if id == "" {
		return unavailable(errors.New("implicit-apiserver's own identity is not known yet"))
	}
	if req.UserInfo.Username == id {
		return allow()
	}
	switch {
	case req.Operation == admissionv1.Create || (req.Operation == admissionv1.Update && !was):
		return deny("%s: only implicit-apiserver (%s) may set the label %s: a materialized copy is never a source, so the label would hide this object from every view",
			s, id, v1alpha1.LabelMaterialized)
	case req.Operation == admissionv1.Update && !is:
		d := g.madeOwn(ctx, req, s)
		if d.allowed && (req.DryRun == nil || !*req.DryRun) {
			// Until the mirror shows it, the lock guard must know the
			// namespace now holds an object of its own under the name.
			g.recent.adopt(recentKey{s.resource, s.namespace, s.name}, s.obj)
		}
		return d
	case req.Operation == admissionv1.Delete:
		terminating, err := g.namespaceTerminating(ctx, s.namespace)
		if err != nil {
			return unavailable(fmt.Errorf("reading whether namespace %s is being deleted: %w", s.namespace, err))
		}
		if terminating {
			return allow()
		}
	}
	verb := "update"
	if req.Operation == admissionv1.Delete {
		verb = "delete"
	}
	srcNS := s.old.GetLabels()[v1alpha1.LabelSourceNamespace]
	what := fmt.Sprintf("%s is a materialized copy of the %s source %s/%s (label %s): implicit-apiserver writes it as the view says; change the source instead",
		s, s.old.GetLabels()[v1alpha1.LabelScope], srcNS, s.name, v1alpha1.LabelMaterialized)
	if srcNS == "" {
		return deny("%s", what)
	}
	need := []string{verb}
	sourceLocked, err := g.mirror.Sources.SourceLocked(s.resource, srcNS, s.name)
	if err != nil {
		return unavailable(fmt.Errorf("reading whether the source of %s is locked: %w", s, err))
	}
	if sourceLocked || locked(s.old) {
		need = append(need, UnlockVerb)
	}
	for _, v := range need {
		allowed, reason, err := g.authz.Allowed(ctx, req.UserInfo, authorizationv1.ResourceAttributes{
			Verb: v, Group: s.gr.Group, Resource: s.gr.Resource, Namespace: srcNS, Name: s.name,
		})
		if err != nil {
			return unavailable(fmt.Errorf("checking the %s permission on the source: %w", v, err))
		}
		if !allowed {
			msg := fmt.Sprintf("%s: changing or deleting the copy needs the %q permission on the source (RBAC verb %q on %s, resourceNames [%s], in namespace %s)",
				what, v, v, s.gr, s.name, srcNS)
			if reason != "" {
				msg += ": " + reason
			}
			return deny("%s", msg)
		}
	}
	return allow(fmt.Sprintf("implicit.dev: %s is a materialized copy of %s/%s: implicit-apiserver writes it back as the view says", s, srcNS, s.name))
}
