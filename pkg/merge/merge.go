package merge

import (
	"fmt"
	"sort"
	"strings"
)

// Scope is where a view item's winning source lives, relative to the viewing namespace.
type Scope string

const (
	ScopeLocal  Scope = "local"
	ScopeParent Scope = "parent"
	ScopeGlobal Scope = "global"
)

// Strategy is how a lower-scope item combines with the inherited item of the same name.
type Strategy string

const (
	// Replace: the lower-scope item shadows the inherited one. The default.
	Replace Strategy = "Replace"
	// Overlay: the lower-scope item is merged field by field onto the
	// inherited one. Not implemented yet: Merge treats it as Replace.
	Overlay Strategy = "Overlay"
)

// Item is one source object as merging sees it. Object is opaque here.
type Item struct {
	Namespace string
	Name      string
	Locked    bool
	Object    any
	// Cluster names the hub cluster of a global source read from one; "" for
	// the local cluster.
	Cluster string
}

// IsLocked reports whether annotations lock a source object.
func IsLocked(annotations map[string]string) bool {
	return annotations[AnnotationLocked] == "true"
}

// Level is one scope of a view, with its items and the exclusions its
// namespace declares (applied to what it inherits, before its own items).
type Level struct {
	Scope      Scope
	Namespace  string
	Exclusions []Exclusion
	Items      []Item
}

// Result is the winner of one name in a view.
type Result struct {
	Item  Item
	Scope Scope
	// Conflicts describe lower-scope shadows and exclusions a lock blocked, in
	// the order they were met, top down.
	Conflicts []string
}

// Conflict renders the conflicts for the implicit.dev/conflict annotation.
func (r Result) Conflict() string { return strings.Join(r.Conflicts, "; ") }

// Levels builds the levels of a view from a lineage, top down: global, the
// ancestors from the farthest to the nearest, then the namespace itself.
// items returns the source items of one namespace. A non-tenant has only its
// local level; a namespace that does not exist has none.
func Levels(l Lineage, globalNamespace string, items func(namespace string) []Item) []Level {
	if l.Namespace == nil {
		return nil
	}
	local := Level{Scope: ScopeLocal, Namespace: l.Namespace.Name, Items: items(l.Namespace.Name)}
	if !l.Tenant {
		return []Level{local}
	}
	levels := make([]Level, 0, len(l.Ancestors)+2)
	levels = append(levels, Level{Scope: ScopeGlobal, Namespace: globalNamespace, Items: items(globalNamespace)})
	for i := len(l.Ancestors) - 1; i >= 0; i-- {
		a := l.Ancestors[i]
		levels = append(levels, Level{Scope: ScopeParent, Namespace: a.Name, Exclusions: ExclusionsOf(a), Items: items(a.Name)})
	}
	local.Exclusions = ExclusionsOf(l.Namespace)
	return append(levels, local)
}

// Merge combines levels, given top down, into the view of one resource,
// sorted by name. A lower level's item shadows an inherited one of the same
// name unless that one is locked; an exclusion removes an inherited item
// unless it is locked. Blocked attempts are recorded on the winner.
func Merge(resource string, levels []Level) []Result {
	winners := map[string]*Result{}
	for _, lv := range levels {
		for _, ex := range lv.Exclusions {
			for name, w := range winners {
				if !ex.Matches(resource, name) {
					continue
				}
				if w.Item.Locked {
					w.Conflicts = append(w.Conflicts, fmt.Sprintf("exclusion %s in namespace %s blocked: %s is locked", ex, lv.Namespace, w.describe()))
					continue
				}
				delete(winners, name)
			}
		}
		for _, it := range lv.Items {
			w, ok := winners[it.Name]
			if ok && w.Item.Namespace == lv.Namespace {
				continue // two items of one name in one namespace cannot happen; keep the first
			}
			if ok && w.Item.Locked {
				w.Conflicts = append(w.Conflicts, fmt.Sprintf("shadow by %s %s/%s blocked: %s is locked", lv.Scope, it.Namespace, it.Name, w.describe()))
				continue
			}
			winners[it.Name] = &Result{Item: it, Scope: lv.Scope}
		}
	}
	out := make([]Result, 0, len(winners))
	for _, w := range winners {
		out = append(out, *w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Item.Name < out[j].Item.Name })
	return out
}

func (r *Result) describe() string {
	return fmt.Sprintf("%s source %s/%s", r.Scope, r.Item.Namespace, r.Item.Name)
}
