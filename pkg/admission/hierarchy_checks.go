package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// ParentIndex is what the parent guard asks of the mirror about a new
// parent's place, with the changes it admitted assumed.
type ParentIndex interface {
	// Exists reports whether namespace exists; IsTenant whether it exists
	// and is a tenant.
	Exists(namespace string) bool
	IsTenant(namespace string) bool
	// ParentCycleAssuming is the cycle a new parent would close, or nil.
	ParentCycleAssuming(namespace, parent string, assumed whatif.Assumed) []string
	// GoingAway is the first namespace from namespace up its parent labels
	// (namespace included) whose deletion has begun: Terminating in the
	// mirror, or assumed gone. "" when none is.
	GoingAway(namespace string, assumed whatif.Assumed) string
}

// lockedKey names a locked item, or with no name every item of a
// namespace's resource.
type lockedKey struct {
	resource, namespace, name string
}

// parentAccess checks that the requester may update parent, the namespace
// name's parent label is set to.
func (g *Guards) parentAccess(ctx context.Context, req *admissionv1.AdmissionRequest, name, parent string) decision {
	if parent == name {
		return deny("namespace %q can't be its own parent (%s)", name, v1alpha1.LabelParent)
	}
	// As kube-apiserver authorizes PUT /api/v1/namespaces/<parent>: with the
	// namespace set, so bindings inside the parent count too. Asked first,
	// so that whether a namespace exists is told only to who may update it.
	allowed, reason, err := g.authz.Allowed(ctx, req.UserInfo, authorizationv1.ResourceAttributes{
		Verb: "update", Resource: "namespaces", Namespace: parent, Name: parent,
	})
	if err != nil {
		return unavailable(fmt.Errorf("checking update on namespace %s: %w", parent, err))
	}
	if !allowed {
		msg := fmt.Sprintf("setting %s: %s on namespace %q needs permission to update namespace %q: a namespace inherits its parent's objects, so only who controls the parent may adopt it", v1alpha1.LabelParent, parent, name, parent)
		if reason != "" {
			msg += " (" + reason + ")"
		}
		return deny("%s", msg)
	}
	return allow()
}

// parentPlace checks that parent can be namespace name's parent, with
// assumed applied: a tenant, and no cycle closed.
func (g *Guards) parentPlace(name, parent string, assumed whatif.Assumed) decision {
	if g.isGlobal(parent) || g.mirror.Parents.Exists(parent) && !g.mirror.Parents.IsTenant(parent) {
		return deny("namespace %q can't be a parent: it is the global namespace, excluded, or labeled %s: \"false\"", parent, v1alpha1.LabelInherit)
	}
	if a, ok := assumed[parent]; ok && a.Labels[v1alpha1.LabelInherit] == "false" {
		return deny("namespace %q can't be a parent: it is being labeled %s: \"false\"", parent, v1alpha1.LabelInherit)
	}
	if cycle := g.mirror.Parents.ParentCycleAssuming(name, parent, assumed); cycle != nil {
		return deny("setting %s: %s on namespace %q would close the cycle %s", v1alpha1.LabelParent, parent, name, strings.Join(cycle, " -> "))
	}
	return allow()
}

// parentStays checks, with assumed applied, that no namespace on parent's
// path to the root is being deleted: a namespace that is going away is no
// place to move a child to, as kube-apiserver refuses new content in a
// Terminating namespace. Its deletion was judged on the subtree it had when
// it began (NamespaceDeletions), and the deletion ends with no judgement
// (the namespace controller's requests are let through), so a child that
// joined later would lose unjudged what comes through it.
func (g *Guards) parentStays(name, parent string, assumed whatif.Assumed) decision {
	if away := g.mirror.Parents.GoingAway(parent, assumed); away != "" {
		return parentGoingAway(name, parent, away)
	}
	return allow()
}

// subtreeStays checks, with assumed applied, that no namespace of c's
// subtree (c's namespace included) that others still inherit through is
// being deleted, when c makes the namespace inherit through a parent: that
// namespace's deletion was judged on what it passed down then, and its end
// is not judged, so what its children gain through it now (a parent's
// locked items) they would lose unjudged when it is gone. As lockAboveDeletion
// refuses a lock above it, this refuses the move for everyone: move it once
// the namespace is gone. A namespace nobody inherits through may still take
// a parent.
func (g *Guards) subtreeStays(c hierarchyChange, assumed whatif.Assumed) decision {
	away := g.mirror.Locks.GoingAwayBelow(c.name, assumed)
	if away == "" && c.terminating && g.mirror.Reach.HasDescendants(c.name) {
		away = c.name // kube-apiserver shows it Terminating before the mirror does
	}
	if away == "" {
		return allow()
	}
	return deny("namespace %q can't come to inherit through %q now: namespace %q, in its subtree, is being deleted while others inherit through it, and they would gain what comes through %q only to lose it, unjudged, when the deletion ends; change it once %q is gone",
		c.name, c.parent, away, c.name, away)
}

// parentGoingAway is the denial of parent as namespace name's parent while
// away, parent itself or an ancestor of it, is being deleted.
func parentGoingAway(name, parent, away string) decision {
	if away == parent {
		return deny("namespace %q can't be the parent of namespace %q: it is being terminated (%s can't name a namespace that is going away: what it passes down goes with it)",
			parent, name, v1alpha1.LabelParent)
	}
	return deny("namespace %q can't be the parent of namespace %q: its ancestor %q is being terminated, and what it passes down goes with it",
		parent, name, away)
}

// parentUID checks the implicit.dev/parent-uid annotation: the uid of the
// parent a new label names, unchanged otherwise, absent without a parent.
func (g *Guards) parentUID(ctx context.Context, req *admissionv1.AdmissionRequest, name string, created, newParent bool, before, after hierarchyOf) decision {
	if g.trustedWithParentUID(req.UserInfo.Username) {
		return allow()
	}
	changed := created && after.hasParentUID || before.hasParentUID != after.hasParentUID || before.parentUID != after.parentUID
	switch {
	case newParent:
		uid, found, err := g.parentUIDOf(ctx, after.parent)
		if err != nil {
			return unavailable(err)
		}
		if !found {
			return deny("setting %s: %s on namespace %q: namespace %q does not exist: a parent is the namespace meant when the label is set (its uid is recorded in %s), so it must exist first",
				v1alpha1.LabelParent, after.parent, name, after.parent, v1alpha1.AnnotationParentUID)
		}
		if !after.hasParentUID || after.parentUID != uid {
			return deny("setting %s: %s on namespace %q: %s must be %q, the uid of namespace %q, as the webhook %s writes it (is its MutatingWebhookConfiguration installed?)",
				v1alpha1.LabelParent, after.parent, name, v1alpha1.AnnotationParentUID, uid, after.parent, webhookconfig.WebhookParentUID)
		}
	case after.parent == "" && after.hasParentUID && changed:
		return deny("namespace %q: %s is set only with %s, by the server", name, v1alpha1.AnnotationParentUID, v1alpha1.LabelParent)
	case after.parent != "" && changed:
		return deny("namespace %q: %s records which namespace %s: %s meant when it was set and can't be changed; set the label again to adopt the namespace now called %q",
			name, v1alpha1.AnnotationParentUID, v1alpha1.LabelParent, after.parent, after.parent)
	}
	return allow()
}

// mayUnlock checks that whoever changes namespace name's tenancy or parent
// so that the locked items lost leave its view, or its subtree's, may
// unlock each. unlocked remembers the answers across judgements.
func (g *Guards) mayUnlock(ctx context.Context, req *admissionv1.AdmissionRequest, name string, before, after hierarchyOf, lost []whatif.LockedItem, unlocked map[lockedKey]bool) decision {
	return g.mayUnlockAll(ctx, req, fmt.Sprintf("%s on namespace %q", before.describe(after), name), lost, unlocked)
}

// mayUnlockAll checks that the requester may unlock every item lost by
// what (a change described for the denial).
func (g *Guards) mayUnlockAll(ctx context.Context, req *admissionv1.AdmissionRequest, what string, lost []whatif.LockedItem, unlocked map[lockedKey]bool) decision {
	var refused []string
	var reasons []string
	// One question per source namespace and resource covers every name
	// when the grant has no resourceNames (an org admin's); otherwise each
	// name is asked.
	for _, it := range lost {
		gr, ok := g.sourceOf(it.Resource)
		if !ok {
			continue // no longer served
		}
		wholesale := lockedKey{resource: it.Resource, namespace: it.Namespace}
		all, seen := unlocked[wholesale]
		if !seen {
			var err error
			all, _, err = g.authz.Allowed(ctx, req.UserInfo, authorizationv1.ResourceAttributes{
				Verb: UnlockVerb, Group: gr.Group, Resource: gr.Resource, Namespace: it.Namespace,
			})
			if err != nil {
				return unavailable(fmt.Errorf("checking the unlock permission: %w", err))
			}
			unlocked[wholesale] = all
		}
		if all {
			continue
		}
		key := lockedKey{resource: it.Resource, namespace: it.Namespace, name: it.Name}
		if unlocked[key] {
			continue
		}
		allowed, reason, err := g.authz.Allowed(ctx, req.UserInfo, authorizationv1.ResourceAttributes{
			Verb: UnlockVerb, Group: gr.Group, Resource: gr.Resource, Namespace: it.Namespace, Name: it.Name,
		})
		if err != nil {
			return unavailable(fmt.Errorf("checking the unlock permission: %w", err))
		}
		if allowed {
			unlocked[key] = true
			continue
		}
		refused = append(refused, fmt.Sprintf("%s %s/%s (in the views of %s)", gr, it.Namespace, it.Name, viewers(it.Viewers)))
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	if len(refused) == 0 {
		return allow()
	}
	named := refused
	if len(named) > maxNamed {
		named = append(named[:maxNamed:maxNamed], fmt.Sprintf("and %d more", len(refused)-maxNamed))
	}
	msg := fmt.Sprintf("%s would take locked items out of its view or its subtree's: %s. A lock means they can't be excluded from below: this needs the %q permission on each (RBAC verb %q on the source, in its namespace)",
		what, strings.Join(named, "; "), UnlockVerb, UnlockVerb)
	if len(reasons) > 0 {
		msg += ": " + reasons[0]
	}
	return deny("%s", msg)
}

// standIns refuses a change that would make namespace name or its subtree
// inherit a locked item of a materialized kind under a name it holds an
// object of: the real object engines enforce there would be that object,
// not the locked item (DESIGN.md's third invariant). Nobody may: the object
// must go first.
func (g *Guards) standIns(name string, next whatif.NamespaceMeta, assumed whatif.Assumed) decision {
	resources := g.materializedResources()
	if len(resources) == 0 {
		return allow()
	}
	ways := []whatif.Pending{{}}
	if assumed != nil {
		ways = g.recent.pendingWays()
	}
	var items []whatif.LockedItem
	for _, pending := range ways {
		found, err := g.mirror.Losses.LockedStandIns(name, next, assumed, resources, pending)
		if err != nil {
			return unavailable(fmt.Errorf("computing the locked items namespace %s would inherit: %w", name, err))
		}
		items = unionLocked(items, found)
	}
	if len(items) == 0 {
		return allow()
	}
	var named []string
	for _, it := range items {
		gr, ok := g.sourceOf(it.Resource)
		if !ok {
			continue
		}
		named = append(named, fmt.Sprintf("%s %s/%s (objects of that name in %s)", gr, it.Namespace, it.Name, viewers(it.Viewers)))
	}
	if len(named) == 0 {
		return allow()
	}
	if len(named) > maxNamed {
		named = append(named[:maxNamed:maxNamed], fmt.Sprintf("and %d more", len(named)-maxNamed))
	}
	return deny("this change of namespace %q would make it or its subtree inherit locked items under names they hold objects of: %s. These kinds are delivered as real objects (delivery: Materialize), so those objects, not the locked items, would be what is enforced there: delete or rename them first",
		name, strings.Join(named, "; "))
}

// materializedResources lists the view resources delivered as copies,
// sorted.
func (g *Guards) materializedResources() []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]string, 0, len(g.materialized))
	for r := range g.materialized {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// viewers names the namespaces of a lost item, a few of them.
func viewers(names []string) string {
	const show = 3
	if len(names) <= show {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:show], ", "), len(names)-show)
}

// sourceOf returns the source group/resource of a view resource.
func (g *Guards) sourceOf(resource string) (schema.GroupResource, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	for gr, r := range g.served {
		if r == resource {
			return gr, true
		}
	}
	return schema.GroupResource{}, false
}

// MaterializedResources lists the view resources delivered as real objects,
// sorted: ConditionSync sends their every creation to the shadows guard.
func (g *Guards) MaterializedResources() []string { return g.materializedResources() }
