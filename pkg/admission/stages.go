package admission

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// stageVerb is the custom RBAC verb on a namespace that allows setting,
// changing or removing its implicit.dev/stage label.
const stageVerb = "stage"

// stageLabel is a namespace's implicit.dev/stage label, and whether it has one.
func stageLabel(u *unstructured.Unstructured) (string, bool) {
	if u == nil {
		return "", false
	}
	v, ok := u.GetLabels()[v1alpha1.LabelStage]
	return v, ok
}

// Stages guards a namespace's implicit.dev/stage label, which decides the
// candidates its views show: setting, changing or removing it (creating a
// namespace with it included) needs the verb stage on that namespace. Stages
// belong to the org: admin in a namespace does not include the custom verb,
// so a tenant can't pick the version it sees.
func (g *Guards) Stages(ctx context.Context, req *admissionv1.AdmissionRequest) decision {
	old, obj, d, ok := namespaceChange(req)
	if !ok {
		return d
	}
	before, had := stageLabel(old)
	after, has := stageLabel(obj)
	if had == has && before == after {
		return allow()
	}
	name := obj.GetName()
	what := fmt.Sprintf("changing %s from %q to %q", v1alpha1.LabelStage, before, after)
	switch {
	case !had:
		what = fmt.Sprintf("setting %s: %q", v1alpha1.LabelStage, after)
	case !has:
		what = fmt.Sprintf("removing %s: %q", v1alpha1.LabelStage, before)
	}
	// As kube-apiserver authorizes a request on namespace name: with the
	// namespace set, so bindings inside it count too (the parent guard asks
	// alike).
	allowed, reason, err := g.authz.Allowed(ctx, req.UserInfo, authorizationv1.ResourceAttributes{
		Verb: stageVerb, Resource: "namespaces", Namespace: name, Name: name,
	})
	if err != nil {
		return unavailable(fmt.Errorf("checking the %s permission on namespace %s: %w", stageVerb, name, err))
	}
	if allowed {
		return g.stagedStandIns(req, old, obj)
	}
	msg := fmt.Sprintf("%s on namespace %q needs the %q permission on it (RBAC verb %q on namespaces, resourceNames [%s]), which the request lacks: a namespace's stage decides which candidates its views show, so stages belong to the org's release managers, not to the namespace's admins",
		what, name, stageVerb, stageVerb, name)
	if reason != "" {
		msg += ": " + reason
	}
	return deny("%s", msg)
}

// stagedStandIns refuses a stage that would make a locked candidate of a
// materialized kind stand in, in the namespace's view, under a name the
// namespace holds an object of: that object, not the locked item, would be
// what engines enforce there (DESIGN.md's third invariant). Nobody may: the
// object must go first. Judged against the mirror alone, with what the
// guards remember applied, and with the deletions admitted a moment ago
// taken back, as the parents guard judges; an allowed change
// is remembered, so that a candidate or lock decided a moment later, on
// this replica or another, is judged with this stage.
func (g *Guards) stagedStandIns(req *admissionv1.AdmissionRequest, old, obj *unstructured.Unstructured) decision {
	name := obj.GetName()
	next := whatif.NamespaceMeta{Labels: obj.GetLabels(), Annotations: obj.GetAnnotations()}
	g.hierarchy.mu.Lock()
	defer g.hierarchy.mu.Unlock()
	// The third way, with the deletions admitted a moment ago taken back
	// (assumedWays): one refused by another webhook leaves an ancestor the
	// assumptions take for gone, and the namespace inheriting through it.
	assumed, undeleted := g.hierarchy.waysLocked()
	// The namespace itself is, every way, as the request found it (as the
	// parents guard's bothWays has it): the mirror may not show a namespace
	// created a moment ago, and the mirror alone would judge it as nothing,
	// while the assumptions' way may hide what it inherits (a move above it
	// admitted here and refused by another webhook).
	var mirror whatif.Assumed
	if old != nil {
		found := whatif.NamespaceMeta{Labels: old.GetLabels(), Annotations: old.GetAnnotations()}
		assumed[name], undeleted[name] = found, found
		if _, known := g.mirror.Namespaces.NamespaceMeta(name); !known {
			mirror = whatif.Assumed{name: found}
		}
	}
	for _, a := range []whatif.Assumed{mirror, assumed, undeleted} {
		if d := g.standIns(name, next, a); !d.allowed {
			return d
		}
	}
	if req.DryRun == nil || !*req.DryRun {
		as := assumption{meta: cloneMeta(next), until: g.hierarchy.clock.Now().Add(g.hierarchy.ttl)}
		if old != nil {
			m := cloneMeta(whatif.NamespaceMeta{Labels: old.GetLabels(), Annotations: old.GetAnnotations()})
			as.old = &m
		}
		g.hierarchy.put(name, as)
	}
	return allow()
}
