package merge

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// Namespace is what merging needs to know about one namespace.
type Namespace struct {
	Name string
	// UID and Created (its creationTimestamp) tell a parent from another
	// namespace that later took its name (see ParentMatches).
	UID         types.UID
	Created     time.Time
	Labels      map[string]string
	Annotations map[string]string
}

// NamespaceOf returns what merging needs of ns. It shares ns's maps: read only.
func NamespaceOf(ns *corev1.Namespace) *Namespace {
	return &Namespace{Name: ns.Name, UID: ns.UID, Created: ns.CreationTimestamp.Time, Labels: ns.Labels, Annotations: ns.Annotations}
}

// NamespaceGetter returns the namespace of that name, or false if it does not exist.
type NamespaceGetter func(name string) (*Namespace, bool)

// Policy says which namespaces are tenants.
type Policy struct {
	// GlobalNamespace holds the global sources; it is never a tenant.
	GlobalNamespace string
	// Excluded namespaces are never tenants: --exclude-namespaces, the
	// kinds' own global namespaces and the server's own namespace.
	Excluded map[string]bool
	// MaxDepth is how many ancestors a namespace inherits from, nearest
	// first; farther ones are cut off (ProblemDepthExceeded). 0: no limit.
	MaxDepth int
}

// IsTenant reports whether ns inherits: every namespace but the global one,
// the excluded ones and those labeled implicit.dev/inherit: "false".
func (p Policy) IsTenant(ns *Namespace) bool {
	if ns.Name == p.GlobalNamespace || p.Excluded[ns.Name] {
		return false
	}
	return ns.Labels[v1alpha1.LabelInherit] != "false"
}

// ProblemReason classifies a hierarchy problem.
type ProblemReason string

const (
	// ProblemCycle: the parent labels form a cycle.
	ProblemCycle ProblemReason = "Cycle"
	// ProblemMissingParent: the parent label names a namespace that does not exist.
	ProblemMissingParent ProblemReason = "MissingParent"
	// ProblemInvalidParent: the parent label names the namespace itself or a
	// non-tenant (the global namespace, an excluded namespace, or one labeled
	// implicit.dev/inherit: "false"). Only tenants can be parents, so a label
	// can never reach into kube-system or another namespace kept out of the
	// hierarchy.
	ProblemInvalidParent ProblemReason = "InvalidParent"
	// ProblemDepthExceeded: the namespace has more ancestors than
	// Policy.MaxDepth; it inherits from the nearest MaxDepth only.
	ProblemDepthExceeded ProblemReason = "DepthExceeded"
	// ProblemParentUIDMismatch: the parent label names a namespace that is
	// not the one meant when the label was admitted: its uid differs from
	// the implicit.dev/parent-uid annotation, or, without that annotation,
	// it was created after the labelled namespace (see ParentMatches).
	ProblemParentUIDMismatch ProblemReason = "ParentUIDMismatch"
)

// ProblemReasons lists every reason, for metrics that report each one.
var ProblemReasons = []ProblemReason{
	ProblemCycle, ProblemMissingParent, ProblemInvalidParent, ProblemDepthExceeded, ProblemParentUIDMismatch,
}

// Problem is a hierarchy problem found while walking a namespace's ancestors.
// Problems are reported, never fatal: inheritance stops where one is found.
type Problem struct {
	Reason ProblemReason
	// Namespace carries the offending parent label. For DepthExceeded it is
	// the viewing namespace, which is too deep to inherit from Parent: the
	// same label is fine for the namespaces nearer to it.
	Namespace string
	// Parent is the label's value: for DepthExceeded, the nearest ancestor
	// cut off.
	Parent string
	// Cycle lists the namespaces of a cycle, in parent order.
	Cycle []string
	// MaxDepth is the policy's limit, for DepthExceeded.
	MaxDepth int
	// RecordedUID is Namespace's implicit.dev/parent-uid, for
	// ParentUIDMismatch ("" when it has none); ParentUID is the uid of the
	// namespace that now has the parent's name.
	RecordedUID, ParentUID types.UID
}

func (p Problem) String() string {
	switch p.Reason {
	case ProblemCycle:
		return fmt.Sprintf("namespaces %s form a parent cycle and inherit from no parent", strings.Join(p.Cycle, " -> "))
	case ProblemMissingParent:
		return fmt.Sprintf("namespace %s names parent %q, which does not exist", p.Namespace, p.Parent)
	case ProblemDepthExceeded:
		return fmt.Sprintf("namespace %s has more than %d ancestors: it does not inherit from %q and above", p.Namespace, p.MaxDepth, p.Parent)
	case ProblemParentUIDMismatch:
		if p.RecordedUID == "" {
			return fmt.Sprintf("namespace %s names parent %q, which was created after it and is not recorded in %s: "+
				"it is not inherited until the parent label is removed and set again", p.Namespace, p.Parent, v1alpha1.AnnotationParentUID)
		}
		return fmt.Sprintf("namespace %s was given parent %q with uid %s, but the namespace of that name now has uid %s "+
			"(deleted and created again): it is not inherited", p.Namespace, p.Parent, p.RecordedUID, p.ParentUID)
	default:
		return fmt.Sprintf("namespace %s names parent %q, which cannot be a parent (itself, or not a tenant namespace)", p.Namespace, p.Parent)
	}
}

// Lineage is the resolved inheritance of one namespace.
type Lineage struct {
	// Namespace is the viewing namespace; nil if it does not exist.
	Namespace *Namespace
	// Tenant is false for non-tenants, whose view holds local objects only.
	Tenant bool
	// Ancestors are the namespaces inherited from, nearest first.
	Ancestors []*Namespace
	// Problem is the first hierarchy problem on the way up, if any.
	Problem *Problem
}

// indexAfter is the length of a walk past which Resolve indexes the
// namespaces it has seen rather than scanning them.
const indexAfter = 64

// ParentMatches reports whether parent is the namespace child's parent label
// meant. The mutating webhook records the parent's uid in child's
// implicit.dev/parent-uid when the label is admitted; then only a parent of
// that uid matches, and an empty annotation matches none. A child without
// the annotation (labelled before the webhook existed, or while its parent
// did not exist) matches a parent created no later than itself
// (creationTimestamps, to the second): a namespace that took the parent's
// name after the child was created, by anyone, is never adopted. See
// docs/design.md, "Parent identity".
func ParentMatches(child, parent *Namespace) bool {
	if uid, ok := child.Annotations[v1alpha1.AnnotationParentUID]; ok {
		return uid != "" && types.UID(uid) == parent.UID
	}
	return !parent.Created.After(child.Created)
}

// Resolve walks name's parent labels up to the root, or to p.MaxDepth
// ancestors, and returns its lineage.
//
// The walk stops, keeping what it has, at a missing parent, at an invalid
// one (the namespace itself or a non-tenant, which is never an ancestor), at
// a parent that is not the one the label meant (ParentMatches), and past
// p.MaxDepth ancestors. A namespace inside a parent cycle inherits from no
// parent at all; a namespace below a cycle inherits from the ancestors up to
// and including the first namespace of the cycle. A cycle longer than
// p.MaxDepth is not seen as one: each of its namespaces inherits from the
// nearest p.MaxDepth of the others and reports DepthExceeded.
//
// The cost is O(p.MaxDepth) when it is set: the walk reads no namespace
// beyond the limit.
func Resolve(p Policy, name string, get NamespaceGetter) Lineage {
	ns, ok := get(name)
	if !ok {
		return Lineage{}
	}
	l := Lineage{Namespace: ns, Tenant: p.IsTenant(ns)}
	if !l.Tenant {
		return l
	}
	// at finds a namespace already on the walk: 0 for ns, i+1 for
	// Ancestors[i]. A short walk is scanned; a long one (no MaxDepth, or a
	// large one) gets an index, so the walk stays linear.
	var index map[string]int
	at := func(name string) (int, bool) {
		if name == ns.Name {
			return 0, true
		}
		if index != nil {
			i, ok := index[name]
			return i, ok
		}
		for i, a := range l.Ancestors {
			if a.Name == name {
				return i + 1, true
			}
		}
		return 0, false
	}
	for cur := ns; ; {
		parent := cur.Labels[v1alpha1.LabelParent]
		if parent == "" {
			return l
		}
		if p.MaxDepth > 0 && len(l.Ancestors) == p.MaxDepth {
			l.Problem = &Problem{Reason: ProblemDepthExceeded, Namespace: ns.Name, Parent: parent, MaxDepth: p.MaxDepth}
			return l
		}
		if parent == cur.Name || parent == p.GlobalNamespace {
			l.Problem = &Problem{Reason: ProblemInvalidParent, Namespace: cur.Name, Parent: parent}
			return l
		}
		if i, looped := at(parent); looped {
			cycle := make([]string, 0, len(l.Ancestors)+1-i)
			if i == 0 {
				cycle = append(cycle, ns.Name)
			}
			for _, n := range l.Ancestors[max(i-1, 0):] {
				cycle = append(cycle, n.Name)
			}
			l.Problem = &Problem{Reason: ProblemCycle, Namespace: cur.Name, Parent: parent, Cycle: cycle}
			if i == 0 {
				// The viewing namespace is itself in the cycle.
				l.Ancestors = nil
			} else {
				// Keep the ancestors up to the first namespace of the cycle.
				l.Ancestors = l.Ancestors[:i]
			}
			return l
		}
		next, ok := get(parent)
		if !ok {
			l.Problem = &Problem{Reason: ProblemMissingParent, Namespace: cur.Name, Parent: parent}
			return l
		}
		if !p.IsTenant(next) {
			l.Problem = &Problem{Reason: ProblemInvalidParent, Namespace: cur.Name, Parent: parent}
			return l
		}
		if !ParentMatches(cur, next) {
			l.Problem = &Problem{Reason: ProblemParentUIDMismatch, Namespace: cur.Name, Parent: parent,
				RecordedUID: types.UID(cur.Annotations[v1alpha1.AnnotationParentUID]), ParentUID: next.UID}
			return l
		}
		l.Ancestors = append(l.Ancestors, next)
		if index == nil && len(l.Ancestors) == indexAfter {
			index = make(map[string]int, 2*indexAfter)
			for i, a := range l.Ancestors {
				index[a.Name] = i + 1
			}
		} else if index != nil {
			index[next.Name] = len(l.Ancestors)
		}
		cur = next
	}
}
