package admission

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// assumeFor is how long the parent guard assumes a namespace change it
// admitted, unless the index shows it sooner: long past the webhook's
// timeout and the write that follows admission.
const assumeFor = 30 * time.Second

// maxNamed bounds the locked items a denial names.
const maxNamed = 10

// hierarchyOf is what the parent guard reads of a namespace: the labels and
// annotation that decide what it inherits and whether it is a tenant.
type hierarchyOf struct {
	parent, inherit string
	parentUID       string
	hasParentUID    bool
}

func hierarchyOfNamespace(u *unstructured.Unstructured) hierarchyOf {
	if u == nil {
		return hierarchyOf{}
	}
	uid, has := u.GetAnnotations()[merge.AnnotationParentUID]
	return hierarchyOf{
		parent: u.GetLabels()[merge.LabelParent], inherit: u.GetLabels()[merge.LabelInherit],
		parentUID: uid, hasParentUID: has,
	}
}

// describe says what changes from h to next, for denials.
func (h hierarchyOf) describe(next hierarchyOf) string {
	var parts []string
	switch {
	case h.inherit != "false" && next.inherit == "false":
		parts = append(parts, fmt.Sprintf("setting %s: \"false\"", merge.LabelInherit))
	case h.inherit != next.inherit:
		parts = append(parts, fmt.Sprintf("changing %s to %q", merge.LabelInherit, next.inherit))
	}
	switch {
	case h.parent != "" && next.parent == "":
		parts = append(parts, fmt.Sprintf("removing %s: %s", merge.LabelParent, h.parent))
	case h.parent != next.parent:
		parts = append(parts, fmt.Sprintf("setting %s: %s", merge.LabelParent, next.parent))
	case h.parentUID != next.parentUID || h.hasParentUID != next.hasParentUID:
		parts = append(parts, fmt.Sprintf("changing %s", merge.AnnotationParentUID))
	}
	return strings.Join(parts, " and ")
}

// assumption is a namespace change the parent guard admitted.
type assumption struct {
	meta  NamespaceMeta
	until time.Time
}

// assumptions hold the namespace changes the parent guard admitted until
// the index shows them. Two changes admitted a moment apart, each harmless
// against the index, may together close a cycle or cut a subtree off its
// locked items before the index shows either: the guard decides one change
// at a time (mu) and judges each against the index with the earlier ones
// applied. Replicas don't share assumptions: see docs/design.md, "Guards".
type assumptions struct {
	mu     sync.Mutex
	clock  clock.PassiveClock
	ttl    time.Duration
	byName map[string]assumption
}

// currentLocked returns the assumptions that have not expired. Called with
// mu held.
func (a *assumptions) currentLocked() Assumed {
	now := a.clock.Now()
	out := Assumed{}
	for name, as := range a.byName {
		if now.After(as.until) {
			delete(a.byName, name)
			continue
		}
		out[name] = as.meta
	}
	return out
}

// SetClock replaces the clock the parent guard times its assumptions with
// (tests use a fake one).
func (g *Guards) SetClock(c clock.PassiveClock) {
	g.hierarchy.mu.Lock()
	defer g.hierarchy.mu.Unlock()
	g.hierarchy.clock = c
}

// Parents guards changes of a namespace's place in the hierarchy: its
// parent label, its recorded parent uid and its tenancy.
//
//   - Setting or changing implicit.dev/parent to P needs update on P; P must
//     exist, be a tenant, and not close a cycle; implicit.dev/parent-uid
//     must be P's uid (the parent-uid webhook writes it).
//   - implicit.dev/parent-uid can't be changed otherwise, nor set without
//     the label.
//   - A change that would take locked inherited items out of the views of
//     the namespace or of its subtree (implicit.dev/inherit: "false",
//     removing or changing the parent) needs unlock on each.
func (g *Guards) Parents(ctx context.Context, req *admissionv1.AdmissionRequest) decision {
	// Labels reach a namespace through its status and finalize
	// subresources too: all three are guarded alike.
	old, obj, d, ok := namespaceChange(req)
	if !ok {
		return d
	}
	name := obj.GetName()
	before, after := hierarchyOfNamespace(old), hierarchyOfNamespace(obj)
	if old != nil && before == after {
		return allow()
	}

	g.hierarchy.mu.Lock()
	defer g.hierarchy.mu.Unlock()
	assumed := g.hierarchy.currentLocked()

	newParent := after.parent != "" && (old == nil || before.parent != after.parent)
	if newParent {
		if d := g.newParent(ctx, req, name, after.parent, assumed); !d.allowed {
			return d
		}
	}
	if d := g.parentUID(ctx, req, name, old == nil, newParent, before, after); !d.allowed {
		return d
	}
	if old != nil {
		if d := g.lockedLoss(ctx, req, name, obj, before, after, assumed); !d.allowed {
			return d
		}
	}
	if req.DryRun == nil || !*req.DryRun {
		g.hierarchy.byName[name] = assumption{
			meta:  NamespaceMeta{Labels: maps.Clone(obj.GetLabels()), Annotations: maps.Clone(obj.GetAnnotations())},
			until: g.hierarchy.clock.Now().Add(g.hierarchy.ttl),
		}
	}
	return allow()
}

// namespaceChange decodes the old and new namespace of a CREATE or UPDATE
// of a namespace (or of its status or finalize subresource). ok is false
// when there is nothing to guard, or the request can't be decoded: d then
// is the answer.
func namespaceChange(req *admissionv1.AdmissionRequest) (old, obj *unstructured.Unstructured, d decision, ok bool) {
	if !namespaceRequest(req) {
		return nil, nil, allow(), false
	}
	old, err := decode(req.OldObject)
	if err != nil {
		return nil, nil, deny("decoding the old namespace: %v", err), false
	}
	obj, err = decode(req.Object)
	if err != nil {
		return nil, nil, deny("decoding the namespace: %v", err), false
	}
	if obj == nil {
		return nil, nil, allow(), false
	}
	return old, obj, decision{}, true
}

// namespaceRequest reports whether req is a namespace's CREATE or UPDATE,
// of the namespace or of a subresource that saves its metadata.
func namespaceRequest(req *admissionv1.AdmissionRequest) bool {
	return req.Resource.Group == "" && req.Resource.Resource == "namespaces" &&
		(req.SubResource == "" || req.SubResource == "status" || req.SubResource == "finalize") &&
		(req.Operation == admissionv1.Create || req.Operation == admissionv1.Update)
}

// newParent checks setting namespace name's parent label to parent.
func (g *Guards) newParent(ctx context.Context, req *admissionv1.AdmissionRequest, name, parent string, assumed Assumed) decision {
	if parent == name {
		return deny("namespace %q can't be its own parent (%s)", name, merge.LabelParent)
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
		msg := fmt.Sprintf("setting %s: %s on namespace %q needs permission to update namespace %q: a namespace inherits its parent's objects, so only who controls the parent may adopt it", merge.LabelParent, parent, name, parent)
		if reason != "" {
			msg += " (" + reason + ")"
		}
		return deny("%s", msg)
	}
	if g.isGlobal(parent) || g.index.Exists(parent) && !g.index.IsTenant(parent) {
		return deny("namespace %q can't be a parent: it is the global namespace, excluded, or labeled %s: \"false\"", parent, merge.LabelInherit)
	}
	if cycle := g.index.ParentCycleAssuming(name, parent, assumed); cycle != nil {
		return deny("setting %s: %s on namespace %q would close the cycle %s", merge.LabelParent, parent, name, strings.Join(cycle, " -> "))
	}
	return allow()
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
				merge.LabelParent, after.parent, name, after.parent, merge.AnnotationParentUID)
		}
		if !after.hasParentUID || after.parentUID != uid {
			return deny("setting %s: %s on namespace %q: %s must be %q, the uid of namespace %q, as the webhook %s writes it (is its MutatingWebhookConfiguration installed?)",
				merge.LabelParent, after.parent, name, merge.AnnotationParentUID, uid, after.parent, WebhookParentUID)
		}
	case after.parent == "" && after.hasParentUID && changed:
		return deny("namespace %q: %s is set only with %s, by the server", name, merge.AnnotationParentUID, merge.LabelParent)
	case after.parent != "" && changed:
		return deny("namespace %q: %s records which namespace %s: %s meant when it was set and can't be changed; set the label again to adopt the namespace now called %q",
			name, merge.AnnotationParentUID, merge.LabelParent, after.parent, after.parent)
	}
	return allow()
}

// lockedLoss checks that whoever changes namespace's tenancy or parent so
// that locked items leave its view, or its subtree's, may unlock each.
func (g *Guards) lockedLoss(ctx context.Context, req *admissionv1.AdmissionRequest, name string, obj *unstructured.Unstructured, before, after hierarchyOf, assumed Assumed) decision {
	lost, err := g.index.LockedLoss(name, NamespaceMeta{Labels: obj.GetLabels(), Annotations: obj.GetAnnotations()}, assumed)
	if err != nil {
		return unavailable(fmt.Errorf("computing the locked items namespace %s would lose: %w", name, err))
	}
	var refused []string
	var reasons []string
	// One question per source namespace and resource covers every name
	// when the grant has no resourceNames (an org admin's); otherwise each
	// name is asked.
	wholesale := map[[2]string]bool{}
	for _, it := range lost {
		gr, ok := g.sourceOf(it.Resource)
		if !ok {
			continue // no longer served
		}
		key := [2]string{it.Resource, it.Namespace}
		all, seen := wholesale[key]
		if !seen {
			all, _, err = g.authz.Allowed(ctx, req.UserInfo, authorizationv1.ResourceAttributes{
				Verb: UnlockVerb, Group: gr.Group, Resource: gr.Resource, Namespace: it.Namespace,
			})
			if err != nil {
				return unavailable(fmt.Errorf("checking the unlock permission: %w", err))
			}
			wholesale[key] = all
		}
		if all {
			continue
		}
		allowed, reason, err := g.authz.Allowed(ctx, req.UserInfo, authorizationv1.ResourceAttributes{
			Verb: UnlockVerb, Group: gr.Group, Resource: gr.Resource, Namespace: it.Namespace, Name: it.Name,
		})
		if err != nil {
			return unavailable(fmt.Errorf("checking the unlock permission: %w", err))
		}
		if allowed {
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
	msg := fmt.Sprintf("%s on namespace %q would take locked items out of its view or its subtree's: %s. A lock means they can't be excluded from below: this needs the %q permission on each (RBAC verb %q on the source, in its namespace)",
		before.describe(after), name, strings.Join(named, "; "), UnlockVerb, UnlockVerb)
	if len(reasons) > 0 {
		msg += ": " + reasons[0]
	}
	return deny("%s", msg)
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
