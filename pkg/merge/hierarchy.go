package merge

import (
	"fmt"
	"strings"
)

// Namespace is what merging needs to know about one namespace.
type Namespace struct {
	Name        string
	Labels      map[string]string
	Annotations map[string]string
}

// NamespaceGetter returns the namespace of that name, or false if it does not exist.
type NamespaceGetter func(name string) (*Namespace, bool)

// Policy says which namespaces are tenants.
type Policy struct {
	// GlobalNamespace holds the global sources; it is never a tenant.
	GlobalNamespace string
	// Excluded namespaces are never tenants.
	Excluded map[string]bool
}

// IsTenant reports whether ns inherits: every namespace but the global one,
// the excluded ones and those labeled implicit.dev/inherit: "false".
func (p Policy) IsTenant(ns *Namespace) bool {
	if ns.Name == p.GlobalNamespace || p.Excluded[ns.Name] {
		return false
	}
	return ns.Labels[LabelInherit] != "false"
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
)

// Problem is a hierarchy problem found while walking a namespace's ancestors.
// Problems are reported, never fatal: inheritance stops where one is found.
type Problem struct {
	Reason ProblemReason
	// Namespace carries the offending parent label.
	Namespace string
	// Parent is the label's value.
	Parent string
	// Cycle lists the namespaces of a cycle, in parent order.
	Cycle []string
}

func (p Problem) String() string {
	switch p.Reason {
	case ProblemCycle:
		return fmt.Sprintf("namespaces %s form a parent cycle and inherit from no parent", strings.Join(p.Cycle, " -> "))
	case ProblemMissingParent:
		return fmt.Sprintf("namespace %s names parent %q, which does not exist", p.Namespace, p.Parent)
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

// Resolve walks name's parent labels to the root and returns its lineage.
//
// The walk stops, keeping what it has, at a missing parent and at an invalid
// one: the namespace itself or a non-tenant, which is never an ancestor. A
// namespace inside a parent cycle inherits from no parent at all; a namespace
// below a cycle inherits from the ancestors up to and including the first
// namespace of the cycle.
func Resolve(p Policy, name string, get NamespaceGetter) Lineage {
	ns, ok := get(name)
	if !ok {
		return Lineage{}
	}
	l := Lineage{Namespace: ns, Tenant: p.IsTenant(ns)}
	if !l.Tenant {
		return l
	}
	seen := map[string]int{ns.Name: 0}
	path := []*Namespace{ns}
	for cur := ns; ; {
		parent := cur.Labels[LabelParent]
		if parent == "" {
			return l
		}
		if parent == cur.Name || parent == p.GlobalNamespace {
			l.Problem = &Problem{Reason: ProblemInvalidParent, Namespace: cur.Name, Parent: parent}
			return l
		}
		if i, looped := seen[parent]; looped {
			cycle := make([]string, 0, len(path)-i)
			for _, n := range path[i:] {
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
		seen[parent] = len(path)
		path = append(path, next)
		l.Ancestors = append(l.Ancestors, next)
		cur = next
	}
}
