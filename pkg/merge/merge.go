package merge

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
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
	// inherited one (see Overlayer).
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
	// Overlay is set when the source asks for the Overlay strategy
	// (annotation implicit.dev/merge: overlay): on the inherited item it lets
	// lower scopes overlay it, locked or not; on a lower-scope item it asks to
	// overlay an unlocked inherited item instead of shadowing it.
	Overlay bool
	// UID is the source object's uid. An item that a candidate stands in
	// for passes it on to the candidate's item (StageLevels), so the view
	// item keeps its uid whichever version a namespace sees.
	UID types.UID
	// Candidate is set when the source is a candidate (ParseCandidate): it
	// never shows under its own name outside its own namespace, and
	// StageLevels puts it in the place of the source it stands in for.
	Candidate *Candidate
	// FromCandidate is set on the item StageLevels builds from a candidate:
	// the candidate's own name. Name is then the stable source's, UID the
	// stable source's (the candidate's, for a staged creation), and Object
	// the candidate's. The view annotates it implicit.dev/candidate.
	FromCandidate string
	// Exceptions are what the source says of its exceptions
	// (ExceptionRulesOf): an exclusion that does not meet them leaves the
	// item in the view, as a lock does.
	Exceptions ExceptionRules
}

// IsLocked reports whether annotations lock a source object.
func IsLocked(annotations map[string]string) bool {
	return annotations[v1alpha1.AnnotationLocked] == "true"
}

// WantsOverlay reports whether annotations ask for the Overlay strategy.
func WantsOverlay(annotations map[string]string) bool {
	return annotations[v1alpha1.AnnotationMerge] == "overlay"
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
	// Item is the winning source: with overlays, the inherited base they are
	// merged onto. Scope is its scope.
	Item  Item
	Scope Scope
	// Conflicts describe lower-scope shadows, exclusions and overlay fields a
	// lock blocked, and overlays that were ignored, in the order they were
	// met, top down.
	Conflicts []string
	// Overlays are the lower-scope items merged onto Item, top down.
	Overlays []Item
	// Object is the merged object when there are overlays; nil otherwise
	// (Item.Object is the view's object).
	Object any
}

// Conflict renders the conflicts for the implicit.dev/conflict annotation.
func (r Result) Conflict() string { return strings.Join(r.Conflicts, "; ") }

// OverlaySources renders the overlays for the implicit.dev/overlays
// annotation: "namespace/name" of each, top down, comma-separated.
func (r Result) OverlaySources() string {
	parts := make([]string, len(r.Overlays))
	for i, o := range r.Overlays {
		parts[i] = o.Namespace + "/" + o.Name
	}
	return strings.Join(parts, ",")
}

// Candidates renders the implicit.dev/candidate annotation: the names of
// the candidates the view item was built from (StageLevels), the base's
// first, then the overlays', top down, comma-separated; "" when none. In the
// usual case, one candidate for the base, it is that candidate's name.
func (r Result) Candidates() string {
	var parts []string
	if r.Item.FromCandidate != "" {
		parts = append(parts, r.Item.FromCandidate)
	}
	for _, o := range r.Overlays {
		if o.FromCandidate != "" {
			parts = append(parts, o.FromCandidate)
		}
	}
	return strings.Join(parts, ",")
}

// Locked reports whether the winner, base or any overlay, is locked: it
// can't be shadowed or excluded from below.
func (r Result) Locked() bool {
	if r.Item.Locked {
		return true
	}
	for _, o := range r.Overlays {
		if o.Locked {
			return true
		}
	}
	return false
}

// Overlayer merges overlays onto an inherited object, field by field, with
// the kind's schema.
type Overlayer interface {
	// Overlay merges overlays, top down, onto base. A field set by a locked
	// layer (base or overlay) is not changed by a later one: each blocked
	// change is described in conflicts. An overlay that does not validate
	// against the schema is left out entirely and described too. merged has
	// base's Go type; when base itself can't be read, merged is base's
	// object unchanged.
	Overlay(base Item, overlays []Item) (merged any, conflicts []string)
}

// Options tune MergeWith for one resource.
type Options struct {
	// Strategy is the kind's: with Overlay every lower-scope item overlays the
	// inherited item of its name. The zero value is Replace.
	Strategy Strategy
	// Overlayer merges overlays; nil makes every merge a Replace.
	Overlayer Overlayer
}

// Levels builds the levels of a view from a lineage, top down: global, the
// ancestors from the farthest to the nearest, then the namespace itself.
// items returns the source items of one namespace. A non-tenant has only its
// local level; a namespace that does not exist has none.
//
// The levels are staged for the viewing namespace (StageLevels): candidates
// among the items stand in for their stable sources where the namespace's
// stage is selected. Levels knows the viewer, so every view built from it
// gets the rule, and no caller can forget it and leak a candidate.
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
	return StageLevels(append(levels, local), l.Namespace)
}

// Rules are what a kind's views are merged by beside their items: the
// kind's global namespace and its merge options (watchmux.Reader is one).
type Rules interface {
	GlobalNamespace(resource string) string
	Options(resource string) Options
}

// View merges the view of resource of lineage l's namespace, items giving
// each namespace's source items: Levels, then MergeWith under the kind's
// rules, the one chain every view is merged by.
func View(rules Rules, resource string, l Lineage, items func(namespace string) []Item) []Result {
	return MergeWith(resource, Levels(l, rules.GlobalNamespace(resource), items), rules.Options(resource))
}

// Merge is MergeWith the Replace strategy only.
func Merge(resource string, levels []Level) []Result {
	return MergeWith(resource, levels, Options{})
}

// MergeWith combines levels, given top down, into the view of one resource,
// sorted by name. A lower level's item shadows an inherited one of the same
// name unless that one is locked; an exclusion removes an inherited item
// unless it is locked. Blocked attempts are recorded on the winner.
//
// With an Overlayer, a lower level's item is merged onto the inherited one
// instead of shadowing it when the kind's strategy is Overlay, when the
// inherited base asks for overlays (implicit.dev/merge: overlay), or when the
// lower item asks for it and the inherited item is not locked (it could
// shadow it anyway). A lower scope can never turn a locked item it may not
// shadow into one it may overlay: only the kind's configuration or the
// locked item's own author can.
//
// A candidate (Item.Candidate) is an item of the view under its own name in
// its own namespace's view only (the local level): on any other level it is
// skipped, so levels that were not staged hide candidates rather than show
// them. StageLevels (which Levels applies) is what makes them stand in for
// their stable sources.
func MergeWith(resource string, levels []Level, o Options) []Result {
	winners := map[string]*Result{}
	for _, lv := range levels {
		for _, ex := range lv.Exclusions {
			for name, w := range winners {
				if !ex.Matches(resource, name) {
					continue
				}
				if w.Locked() {
					w.Conflicts = append(w.Conflicts, fmt.Sprintf("exclusion %s in namespace %s blocked: %s is locked", ex, lv.Namespace, w.describe()))
					continue
				}
				if ok, why := ex.Excepts(w.Item); !ok {
					w.Conflicts = append(w.Conflicts, fmt.Sprintf("exclusion %s in namespace %s blocked: %s", ex.Declared(), lv.Namespace, why))
					continue
				}
				delete(winners, name)
			}
		}
		for _, it := range lv.Items {
			if hidden(lv, it) {
				continue
			}
			w, ok := winners[it.Name]
			if ok && w.Item.Namespace == lv.Namespace {
				continue // two items of one name in one namespace cannot happen; keep the first
			}
			if ok && o.Overlays(*w, it) {
				w.Overlays = append(w.Overlays, it)
				continue
			}
			if ok && w.Locked() {
				w.Conflicts = append(w.Conflicts, fmt.Sprintf("shadow by %s %s/%s blocked: %s is locked", lv.Scope, it.Namespace, it.Name, w.describe()))
				continue
			}
			winners[it.Name] = &Result{Item: it, Scope: lv.Scope}
		}
	}
	out := make([]Result, 0, len(winners))
	for _, w := range winners {
		if len(w.Overlays) > 0 {
			merged, conflicts := o.Overlayer.Overlay(w.Item, w.Overlays)
			w.Object = merged
			w.Conflicts = append(w.Conflicts, conflicts...)
		}
		out = append(out, *w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Item.Name < out[j].Item.Name })
	return out
}

// Overlays reports whether a lower-scope item it merges onto the inherited
// winner w instead of shadowing it.
func (o Options) Overlays(w Result, it Item) bool {
	switch {
	case o.Overlayer == nil:
		return false
	case o.Strategy == Overlay || w.Item.Overlay:
		return true
	default:
		return it.Overlay && !w.Locked()
	}
}

func (r *Result) describe() string {
	return fmt.Sprintf("%s source %s/%s", r.Scope, r.Item.Namespace, r.Item.Name)
}
