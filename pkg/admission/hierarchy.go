package admission

import (
	"context"
	"fmt"
	"maps"
	"slices"
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

// assumption is a namespace change the parent guard admitted: the labels
// and annotations it set, and those it replaced (old is nil for a creation).
type assumption struct {
	meta  NamespaceMeta
	old   *NamespaceMeta
	until time.Time
}

// assumptions hold the namespace changes the parent guard admitted until
// the mirror shows the namespace at another version than the one each
// replaced (the write landed, or another one did), or they expire. Two
// changes admitted a moment apart, each harmless against the mirror, may
// together close a cycle or cut a subtree off its locked items before the
// mirror shows either: the guard judges each change against the mirror
// alone AND against the mirror with the earlier changes applied, and
// refuses when either refuses. An admitted change may still be refused by
// another webhook of the same request (kube-apiserver calls them in
// parallel), so an assumption can name a state that never comes: judged
// both ways, it can only make later decisions stricter, for at most ttl,
// and never admits what the mirror alone would refuse (DESIGN.md's fourth
// invariant). Replicas don't share assumptions: see docs/design.md,
// "Guards".
type assumptions struct {
	mu     sync.Mutex
	clock  clock.PassiveClock
	ttl    time.Duration
	byName map[string]assumption
}

// currentLocked returns the assumptions that still stand: not expired, and
// the mirror still shows the namespace as the assumed change found it.
// Called with mu held.
func (a *assumptions) currentLocked(index Index) Assumed {
	now := a.clock.Now()
	out := Assumed{}
	for name, as := range a.byName {
		if now.After(as.until) || superseded(index, name, as) {
			delete(a.byName, name)
			continue
		}
		out[name] = as.meta
	}
	return out
}

// superseded reports whether the mirror shows namespace name at another
// version than the one the assumed change replaced.
func superseded(index Index, name string, as assumption) bool {
	cur, found := index.NamespaceMeta(name)
	if as.old == nil {
		return found
	}
	if as.meta.Gone {
		return !found // gone from the mirror too
	}
	return !found || hierarchyKeys(cur) != hierarchyKeys(*as.old)
}

// hierarchyKeys are the labels and annotations of a namespace that merging
// reads, as one comparable value.
func hierarchyKeys(m NamespaceMeta) [5]string {
	uid, has := m.Annotations[merge.AnnotationParentUID]
	if has {
		uid = "=" + uid
	}
	stage, hasStage := m.Labels[merge.LabelStage]
	if hasStage {
		stage = "=" + stage
	}
	return [5]string{m.Labels[merge.LabelParent], m.Labels[merge.LabelInherit], uid, m.Annotations[merge.AnnotationExclude], stage}
}

// SetClock replaces the clock the guards time what they remember with
// (tests use a fake one).
func (g *Guards) SetClock(c clock.PassiveClock) {
	g.hierarchy.mu.Lock()
	defer g.hierarchy.mu.Unlock()
	g.hierarchy.clock = c
	g.recent.setClock(c)
}

// maxRejudge bounds how often the parent guard judges a change again when
// other changes were admitted while it asked for permissions.
const maxRejudge = 3

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
//   - A change that would make the namespace or its subtree inherit a
//     locked item of a materialized kind under a name it holds an object of
//     is refused: that object, not the locked item, is the real object
//     engines read there.
//
// The permission questions go to the host cluster with no lock held; the
// judgement against the mirror and the assumptions is made under the lock,
// again after the questions, and the change is assumed only if nothing it
// needs changed meanwhile.
//
// It also judges the implicit.dev/exclude annotation (exclusions.go): an
// entry added that names no served view is refused, and the warnings of
// the exclusions come with the answer when the change is allowed.
func (g *Guards) Parents(ctx context.Context, req *admissionv1.AdmissionRequest) decision {
	// Labels reach a namespace through its status and finalize
	// subresources too: all three are guarded alike.
	old, obj, d, ok := namespaceChange(req)
	if !ok {
		return d
	}
	ex := g.exclusions(old, obj)
	if !ex.allowed {
		return ex
	}
	d = g.parents(ctx, req, old, obj)
	if d.allowed {
		d.warnings = append(d.warnings, ex.warnings...)
	}
	return d
}

func (g *Guards) parents(ctx context.Context, req *admissionv1.AdmissionRequest, old, obj *unstructured.Unstructured) decision {
	name := obj.GetName()
	before, after := hierarchyOfNamespace(old), hierarchyOfNamespace(obj)
	if old != nil && before == after {
		return allow()
	}
	newParent := after.parent != "" && (old == nil || before.parent != after.parent)
	if newParent {
		if d := g.parentAccess(ctx, req, name, after.parent); !d.allowed {
			return d
		}
		// The mirror alone first, so that a misplaced parent is named
		// before the parent uid is read; judged again below.
		if d := g.parentPlace(name, after.parent, nil); !d.allowed {
			return d
		}
	}
	if d := g.parentUID(ctx, req, name, old == nil, newParent, before, after); !d.allowed {
		return d
	}
	next := NamespaceMeta{Labels: obj.GetLabels(), Annotations: obj.GetAnnotations()}
	// The request's old object is what the namespace is now, whatever the
	// mirror or an assumption says (it may not know a namespace re-created
	// a moment ago).
	var now *NamespaceMeta
	if old != nil {
		now = &NamespaceMeta{Labels: old.GetLabels(), Annotations: old.GetAnnotations()}
	}
	unlocked := map[lockedKey]bool{}
	for range maxRejudge {
		j := g.judgeHierarchy(name, next, now, newParent, after.parent)
		if !j.d.allowed {
			return j.d
		}
		if d := g.mayUnlock(ctx, req, name, before, after, j.lost, unlocked); !d.allowed {
			return d
		}
		if g.assumeIfSame(req, name, old, now, next, newParent, after.parent, j) {
			return allow()
		}
	}
	return unavailable(fmt.Errorf("namespace %s: other hierarchy changes kept changing what this one needs; try again", name))
}

// judgement is what the parent guard found against the mirror and its
// assumptions: a denial, or the locked items the change takes out of views
// (each needs unlock).
type judgement struct {
	d    decision
	lost []LockedItem
}

// judgeHierarchy judges a change of namespace name's labels and annotations
// to next under the lock, against the mirror alone and with the
// assumptions applied.
func (g *Guards) judgeHierarchy(name string, next NamespaceMeta, now *NamespaceMeta, newParent bool, parent string) judgement {
	g.hierarchy.mu.Lock()
	defer g.hierarchy.mu.Unlock()
	return g.judgeLocked(name, next, now, newParent, parent, g.hierarchy.currentLocked(g.index))
}

// judgeLocked is judgeHierarchy with hierarchy.mu held and the current
// assumptions given. now is the namespace as the request found it (nil:
// it is being created).
func (g *Guards) judgeLocked(name string, next NamespaceMeta, now *NamespaceMeta, newParent bool, parent string, assumed Assumed) judgement {
	exists := now != nil
	if exists {
		// Both ways, the namespace itself is as the request found it.
		mirror := Assumed{name: *now}
		if _, known := g.index.NamespaceMeta(name); known {
			mirror = nil // the mirror alone, as it is
		}
		withAssumed := maps.Clone(assumed)
		if withAssumed == nil {
			withAssumed = Assumed{}
		}
		withAssumed[name] = *now
		return g.judgeBoth(name, next, true, newParent, parent, mirror, withAssumed)
	}
	return g.judgeBoth(name, next, false, newParent, parent, nil, assumed)
}

// judgeBoth judges against the mirror (with first applied: nil or the
// namespace itself) and with the assumptions (second). A namespace being
// created loses nothing.
func (g *Guards) judgeBoth(name string, next NamespaceMeta, exists, newParent bool, parent string, first, second Assumed) judgement {
	for _, a := range []Assumed{first, second} {
		if newParent {
			if d := g.parentPlace(name, parent, a); !d.allowed {
				return judgement{d: d}
			}
		}
	}
	if !exists {
		return judgement{d: allow()}
	}
	var lost []LockedItem
	for _, a := range []Assumed{first, second} {
		// The mirror alone, then with everything remembered applied.
		var pending Pending
		if a != nil {
			pending = g.recent.pending()
		}
		l, err := g.index.LockedLossPending(name, next, a, pending)
		if err != nil {
			return judgement{d: unavailable(fmt.Errorf("computing the locked items namespace %s would lose: %w", name, err))}
		}
		lost = unionLocked(lost, l)
		if d := g.standIns(name, next, a); !d.allowed {
			return judgement{d: d}
		}
	}
	return judgement{d: allow(), lost: lost}
}

// assumeIfSame records the change as assumed, under the lock, if judging it
// again with the assumptions as they are now finds the same: no new denial
// and no locked item beyond those already allowed. Dry runs are not
// assumed.
func (g *Guards) assumeIfSame(req *admissionv1.AdmissionRequest, name string, old *unstructured.Unstructured, now *NamespaceMeta, next NamespaceMeta, newParent bool, parent string, prev judgement) bool {
	g.hierarchy.mu.Lock()
	defer g.hierarchy.mu.Unlock()
	j := g.judgeLocked(name, next, now, newParent, parent, g.hierarchy.currentLocked(g.index))
	if !j.d.allowed || len(unionLocked(prev.lost, j.lost)) != len(prev.lost) {
		return false
	}
	if req.DryRun != nil && *req.DryRun {
		return true
	}
	as := assumption{
		meta:  NamespaceMeta{Labels: maps.Clone(next.Labels), Annotations: maps.Clone(next.Annotations)},
		until: g.hierarchy.clock.Now().Add(g.hierarchy.ttl),
	}
	if old != nil {
		as.old = &NamespaceMeta{Labels: maps.Clone(old.GetLabels()), Annotations: maps.Clone(old.GetAnnotations())}
	}
	g.hierarchy.byName[name] = as
	return true
}

// unionLocked adds to a the items of b it lacks, viewers merged.
func unionLocked(a, b []LockedItem) []LockedItem {
	at := map[lockedKey]int{}
	for i, it := range a {
		at[lockedKey{resource: it.Resource, namespace: it.Namespace, name: it.Name}] = i
	}
	for _, it := range b {
		k := lockedKey{resource: it.Resource, namespace: it.Namespace, name: it.Name}
		i, ok := at[k]
		if !ok {
			at[k] = len(a)
			a = append(a, LockedItem{Resource: it.Resource, Namespace: it.Namespace, Name: it.Name, Viewers: slices.Clone(it.Viewers)})
			continue
		}
		for _, v := range it.Viewers {
			if !slices.Contains(a[i].Viewers, v) {
				a[i].Viewers = append(a[i].Viewers, v)
			}
		}
		slices.Sort(a[i].Viewers)
	}
	return a
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

// parentAccess checks that the requester may update parent, the namespace
// name's parent label is set to.
func (g *Guards) parentAccess(ctx context.Context, req *admissionv1.AdmissionRequest, name, parent string) decision {
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
	return allow()
}

// parentPlace checks that parent can be namespace name's parent, with
// assumed applied: a tenant, and no cycle closed.
func (g *Guards) parentPlace(name, parent string, assumed Assumed) decision {
	if g.isGlobal(parent) || g.index.Exists(parent) && !g.index.IsTenant(parent) {
		return deny("namespace %q can't be a parent: it is the global namespace, excluded, or labeled %s: \"false\"", parent, merge.LabelInherit)
	}
	if a, ok := assumed[parent]; ok && a.Labels[merge.LabelInherit] == "false" {
		return deny("namespace %q can't be a parent: it is being labeled %s: \"false\"", parent, merge.LabelInherit)
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

// mayUnlock checks that whoever changes namespace name's tenancy or parent
// so that the locked items lost leave its view, or its subtree's, may
// unlock each. unlocked remembers the answers across judgements.
func (g *Guards) mayUnlock(ctx context.Context, req *admissionv1.AdmissionRequest, name string, before, after hierarchyOf, lost []LockedItem, unlocked map[lockedKey]bool) decision {
	return g.mayUnlockAll(ctx, req, fmt.Sprintf("%s on namespace %q", before.describe(after), name), lost, unlocked)
}

// mayUnlockAll checks that the requester may unlock every item lost by
// what (a change described for the denial).
func (g *Guards) mayUnlockAll(ctx context.Context, req *admissionv1.AdmissionRequest, what string, lost []LockedItem, unlocked map[lockedKey]bool) decision {
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
func (g *Guards) standIns(name string, next NamespaceMeta, assumed Assumed) decision {
	resources := g.materializedResources()
	if len(resources) == 0 {
		return allow()
	}
	var pending Pending
	if assumed != nil {
		pending = g.recent.pending()
	}
	items, err := g.index.LockedStandIns(name, next, assumed, resources, pending)
	if err != nil {
		return unavailable(fmt.Errorf("computing the locked items namespace %s would inherit: %w", name, err))
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

// NamespaceDeletions guards the deletion of a namespace whose sources
// others inherit (a parent, or the global namespace): its locked sources
// leave every view that inherits them, and its children lose what it and
// its ancestors pass down. That needs unlock on each locked item lost, as
// opting out or re-parenting does. Judged against the mirror alone and with
// the parent guard's assumptions.
func (g *Guards) NamespaceDeletions(ctx context.Context, req *admissionv1.AdmissionRequest) decision {
	if req.Resource.Group != "" || req.Resource.Resource != "namespaces" || req.SubResource != "" || req.Operation != admissionv1.Delete {
		return allow()
	}
	// The deletion that counts was admitted: the namespace controller may
	// finish it.
	if g.index.Terminating(req.Name) {
		return allow()
	}
	g.hierarchy.mu.Lock()
	assumed := g.hierarchy.currentLocked(g.index)
	g.hierarchy.mu.Unlock()
	var lost []LockedItem
	for _, a := range []Assumed{nil, assumed} {
		l, err := g.index.DeletionLoss(req.Name, a)
		if err != nil {
			return unavailable(fmt.Errorf("computing the locked items deleting namespace %s would take: %w", req.Name, err))
		}
		lost = unionLocked(lost, l)
	}
	if len(lost) > 0 {
		if d := g.mayUnlockAll(ctx, req, fmt.Sprintf("deleting namespace %q", req.Name), lost, map[lockedKey]bool{}); !d.allowed {
			return d
		}
	}
	// Allowed: say who loses inherited items (a warning is never worth
	// failing a deletion for).
	var warnings []string
	if losers, err := g.index.DeletionLosers(req.Name); err == nil && len(losers) > 0 {
		warnings = append(warnings, DeletionWarning(req.Name, losers))
	}
	// Until the mirror shows it gone, the namespace is assumed gone: a
	// child moved below it a moment later must not be judged as still
	// inheriting through it.
	if req.DryRun == nil || !*req.DryRun {
		if meta, found := g.index.NamespaceMeta(req.Name); found {
			g.hierarchy.mu.Lock()
			g.hierarchy.byName[req.Name] = assumption{
				meta:  NamespaceMeta{Gone: true},
				old:   &meta,
				until: g.hierarchy.clock.Now().Add(g.hierarchy.ttl),
			}
			g.hierarchy.mu.Unlock()
		}
	}
	return allow(warnings...)
}

// DeletionWarning is the warning of a namespace's deletion that takes
// inherited items from losers: they lose their parent, and what it and the
// namespaces above it passed down.
func DeletionWarning(namespace string, losers []string) string {
	const show = 10
	names := strings.Join(losers, ", ")
	if len(losers) > show {
		names = fmt.Sprintf("%s and %d more", strings.Join(losers[:show], ", "), len(losers)-show)
	}
	return fmt.Sprintf("implicit.dev: deleting namespace %s takes inherited items from %d namespaces: %s", namespace, len(losers), names)
}
