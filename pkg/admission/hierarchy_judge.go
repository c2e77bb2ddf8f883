package admission

import (
	"fmt"
	"maps"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// LossIndex is what the guards of namespaces ask of the mirror: the
// locked items a change of a namespace's labels, or its deletion, would
// take out of views or make stand in under a name held below.
type LossIndex interface {
	// LockedLossPending lists the locked items that would leave the views
	// of namespace and its subtree if its labels and annotations became
	// next; pending are the source writes admitted a moment ago.
	LockedLossPending(namespace string, next whatif.NamespaceMeta, assumed whatif.Assumed, pending whatif.Pending) ([]whatif.LockedItem, error)
	// LockedStandIns lists, for resources, the locked items namespace or
	// its subtree would newly inherit under a name it holds an object of.
	LockedStandIns(namespace string, next whatif.NamespaceMeta, assumed whatif.Assumed, resources []string, pending whatif.Pending) ([]whatif.LockedItem, error)
	// DeletionLoss lists the locked items that would leave other
	// namespaces' views if namespace were deleted.
	DeletionLoss(namespace string, assumed whatif.Assumed) ([]whatif.LockedItem, error)
	// DeletionLosers lists the namespaces whose views hold items of
	// namespace or of its ancestors that deleting namespace takes away.
	DeletionLosers(namespace string) ([]string, error)
}

// judgement is what the parent guard found against the mirror and its
// assumptions: a denial, or the locked items the change takes out of views
// (each needs unlock).
type judgement struct {
	d    decision
	lost []whatif.LockedItem
}

// judgeHierarchy judges a change of namespace name's labels and annotations
// to next under the lock, against the mirror alone and with the
// assumptions applied.
func (g *Guards) judgeHierarchy(name string, next whatif.NamespaceMeta, now *whatif.NamespaceMeta, newParent bool, parent string) judgement {
	g.hierarchy.mu.Lock()
	defer g.hierarchy.mu.Unlock()
	return g.judgeLocked(name, next, now, newParent, parent, g.hierarchy.currentLocked())
}

// judgeLocked is judgeHierarchy with hierarchy.mu held and the current
// assumptions given. now is the namespace as the request found it (nil:
// it is being created).
func (g *Guards) judgeLocked(name string, next whatif.NamespaceMeta, now *whatif.NamespaceMeta, newParent bool, parent string, assumed whatif.Assumed) judgement {
	exists := now != nil
	var before hierarchyOf
	if exists {
		before = hierarchyOf{parent: now.Labels[v1alpha1.LabelParent], inherit: now.Labels[v1alpha1.LabelInherit]}
	}
	joins := joining(before, hierarchyOf{parent: parent, inherit: next.Labels[v1alpha1.LabelInherit]}, !exists, newParent)
	if exists {
		// Both ways, the namespace itself is as the request found it.
		mirror := whatif.Assumed{name: *now}
		if _, known := g.mirror.Namespaces.NamespaceMeta(name); known {
			mirror = nil // the mirror alone, as it is
		}
		withAssumed := maps.Clone(assumed)
		if withAssumed == nil {
			withAssumed = whatif.Assumed{}
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
func (g *Guards) judgeBoth(name string, next whatif.NamespaceMeta, exists, newParent, joins bool, parent string, first, second whatif.Assumed) judgement {
	for _, a := range []whatif.Assumed{first, second} {
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
	var lost []whatif.LockedItem
	for _, a := range []whatif.Assumed{first, second} {
		// The mirror alone, then with everything remembered applied.
		var pending whatif.Pending
		if a != nil {
			pending = g.recent.pending()
		}
		l, err := g.mirror.Losses.LockedLossPending(name, next, a, pending)
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
func (g *Guards) assumeIfSame(req *admissionv1.AdmissionRequest, name string, old *unstructured.Unstructured, now *whatif.NamespaceMeta, next whatif.NamespaceMeta, newParent bool, parent string, prev judgement) bool {
	g.hierarchy.mu.Lock()
	defer g.hierarchy.mu.Unlock()
	j := g.judgeLocked(name, next, now, newParent, parent, g.hierarchy.currentLocked())
	if !j.d.allowed || len(unionLocked(prev.lost, j.lost)) != len(prev.lost) {
		return false
	}
	if req.DryRun != nil && *req.DryRun {
		return true
	}
	as := assumption{
		meta:  whatif.NamespaceMeta{Labels: maps.Clone(next.Labels), Annotations: maps.Clone(next.Annotations)},
		until: g.hierarchy.clock.Now().Add(g.hierarchy.ttl),
	}
	if old != nil {
		as.old = &whatif.NamespaceMeta{Labels: maps.Clone(old.GetLabels()), Annotations: maps.Clone(old.GetAnnotations())}
	}
	g.hierarchy.put(name, as)
	return true
}

// unionLocked adds to a the items of b it lacks, viewers merged.
func unionLocked(a, b []whatif.LockedItem) []whatif.LockedItem {
	at := map[lockedKey]int{}
	for i, it := range a {
		at[lockedKey{resource: it.Resource, namespace: it.Namespace, name: it.Name}] = i
	}
	for _, it := range b {
		k := lockedKey{resource: it.Resource, namespace: it.Namespace, name: it.Name}
		i, ok := at[k]
		if !ok {
			at[k] = len(a)
			a = append(a, whatif.LockedItem{Resource: it.Resource, Namespace: it.Namespace, Name: it.Name, Viewers: slices.Clone(it.Viewers)})
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
