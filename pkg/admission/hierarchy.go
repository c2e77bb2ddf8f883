package admission

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	if joining(before, after, old == nil, newParent) {
		if d := g.parentTerminating(ctx, name, after.parent); !d.allowed {
			return d
		}
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
	var before hierarchyOf
	if exists {
		before = hierarchyOf{parent: now.Labels[merge.LabelParent], inherit: now.Labels[merge.LabelInherit]}
	}
	joins := joining(before, hierarchyOf{parent: parent, inherit: next.Labels[merge.LabelInherit]}, !exists, newParent)
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
		return g.judgeBoth(name, next, true, newParent, joins, parent, mirror, withAssumed)
	}
	return g.judgeBoth(name, next, false, newParent, joins, parent, nil, assumed)
}

// joining reports whether a namespace comes to inherit through parent
// (after's) by the change from before: a new parent label, or opting back
// in under the parent it names.
func joining(before, after hierarchyOf, created, newParent bool) bool {
	if after.parent == "" || after.inherit == "false" {
		return false
	}
	return newParent || !created && before.inherit == "false"
}

// judgeBoth judges against the mirror (with first applied: nil or the
// namespace itself) and with the assumptions (second). A namespace being
// created loses nothing. joins: the change makes it inherit through parent.
func (g *Guards) judgeBoth(name string, next NamespaceMeta, exists, newParent, joins bool, parent string, first, second Assumed) judgement {
	for _, a := range []Assumed{first, second} {
		if newParent {
			if d := g.parentPlace(name, parent, a); !d.allowed {
				return judgement{d: d}
			}
		}
		if joins {
			if d := g.parentStays(name, parent, a); !d.allowed {
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
	g.hierarchy.put(g.index, name, as)
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
