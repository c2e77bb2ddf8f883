package admission

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
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
	uid, has := u.GetAnnotations()[v1alpha1.AnnotationParentUID]
	return hierarchyOf{
		parent: u.GetLabels()[v1alpha1.LabelParent], inherit: u.GetLabels()[v1alpha1.LabelInherit],
		parentUID: uid, hasParentUID: has,
	}
}

// describe says what changes from h to next, for denials.
func (h hierarchyOf) describe(next hierarchyOf) string {
	var parts []string
	switch {
	case h.inherit != "false" && next.inherit == "false":
		parts = append(parts, fmt.Sprintf("setting %s: \"false\"", v1alpha1.LabelInherit))
	case h.inherit != next.inherit:
		parts = append(parts, fmt.Sprintf("changing %s to %q", v1alpha1.LabelInherit, next.inherit))
	}
	switch {
	case h.parent != "" && next.parent == "":
		parts = append(parts, fmt.Sprintf("removing %s: %s", v1alpha1.LabelParent, h.parent))
	case h.parent != next.parent:
		parts = append(parts, fmt.Sprintf("setting %s: %s", v1alpha1.LabelParent, next.parent))
	case h.parentUID != next.parentUID || h.hasParentUID != next.hasParentUID:
		parts = append(parts, fmt.Sprintf("changing %s", v1alpha1.AnnotationParentUID))
	}
	return strings.Join(parts, " and ")
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
// the exclusions come with the answer when the change is allowed; and the
// exceptions' annotations (exceptions.go).
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
	if d := g.exceptions(ctx, req, old, obj); !d.allowed {
		return d
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
	c := hierarchyChange{
		name: name, next: whatif.NamespaceMeta{Labels: obj.GetLabels(), Annotations: obj.GetAnnotations()},
		parent: after.parent, newParent: newParent, joins: joining(before, after, old == nil, newParent),
		terminating: old != nil && old.GetDeletionTimestamp() != nil,
		dryRun:      req.DryRun != nil && *req.DryRun,
	}
	// The request's old object is what the namespace is now, whatever the
	// mirror or an assumption says (it may not know a namespace re-created
	// a moment ago).
	if old != nil {
		c.now = &whatif.NamespaceMeta{Labels: old.GetLabels(), Annotations: old.GetAnnotations()}
	}
	unlocked := map[lockedKey]bool{}
	for range maxRejudge {
		j := g.judgeHierarchy(c)
		if !j.d.allowed {
			return j.d
		}
		if d := g.mayUnlock(ctx, req, name, before, after, j.lost, unlocked); !d.allowed {
			return d
		}
		if g.admit(c, j) {
			return allow()
		}
	}
	return unavailable(fmt.Errorf("namespace %s: other hierarchy changes kept changing what this one needs; try again", name))
}
