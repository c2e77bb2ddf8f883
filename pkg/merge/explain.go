package merge

import (
	"fmt"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// Outcome is what became of one scope's item of a name in a view. Its values
// are the API's (v1alpha1's Outcome constants), said once there.
type Outcome string

const (
	// Won: the item is the view's (the base, when overlays are merged onto it).
	Won Outcome = v1alpha1.OutcomeWon
	// Shadowed: a lower scope's item of the same name replaced it.
	Shadowed Outcome = v1alpha1.OutcomeShadowed
	// Overlaid: the item is merged onto the inherited one.
	Overlaid Outcome = v1alpha1.OutcomeOverlaid
	// BlockedByLock: the item could not shadow the locked inherited one.
	BlockedByLock Outcome = v1alpha1.OutcomeBlockedByLock
	// Excluded: a lower scope's exclusion removed it.
	Excluded Outcome = v1alpha1.OutcomeExcluded
	// NoItem: the scope holds no item of the name.
	NoItem Outcome = v1alpha1.OutcomeNoItem
)

// ExclusionEffect says what one exclusion did to a name. Its values are the
// API's (v1alpha1's Effect constants), said once there.
type ExclusionEffect string

const (
	// ExclusionRemoved: it removed the inherited item.
	ExclusionRemoved ExclusionEffect = v1alpha1.EffectRemoved
	// ExclusionBlocked: the inherited item is locked.
	ExclusionBlocked ExclusionEffect = v1alpha1.EffectBlockedByLock
	// ExclusionRuled: the inherited item's source requires an approved
	// exception, or one with an end (Exclusion.Excepts), and this is not one.
	ExclusionRuled ExclusionEffect = v1alpha1.EffectBlockedByExceptionRules
	// ExclusionIdle: nothing of the name was inherited at that point.
	ExclusionIdle ExclusionEffect = v1alpha1.EffectNothingInherited
)

// ExclusionStep is one exclusion of a level that matches the name.
type ExclusionStep struct {
	Exclusion Exclusion
	Effect    ExclusionEffect
	// Item is the inherited item removed or kept (the base); nil when idle.
	Item *Item
	// Blocked says why an ExclusionRuled step did not remove Item.
	Blocked string
}

// LevelExplanation is one level of a view, seen for one name.
type LevelExplanation struct {
	Scope     Scope
	Namespace string
	// Item is the level's item of the name, if any.
	Item *Item
	// Outcome is what became of Item (NoItem without one).
	Outcome Outcome
	// By is the namespace that decided Outcome: the shadowing item's, the
	// lock's (the locked base's, or a locked overlay's), the exclusion's, or
	// for Overlaid the base's.
	By string
	// Exclusions are the level's exclusions that match the name, in order.
	Exclusions []ExclusionStep
}

// Explanation tells how one name of a view was decided, level by level.
type Explanation struct {
	// Levels are the view's levels, top down, as given.
	Levels []LevelExplanation
	// Result is the view's item of the name, as MergeWith makes it; nil
	// when the view has none.
	Result *Result
}

// Explain tells why the view of resource merged from levels holds, or does
// not hold, an item named name. It follows MergeWith's rules step by step
// for that one name, and takes the Result from MergeWith itself, so the two
// can't disagree on the winner (explain_test.go checks that the trace ends
// where MergeWith does).
func Explain(resource, name string, levels []Level, o Options) Explanation {
	// The trace: the index in out.Levels of the current base and overlays.
	out := Explanation{Levels: make([]LevelExplanation, len(levels))}
	base := -1
	var overlays []int
	current := func() Result {
		r := Result{Item: *out.Levels[base].Item, Scope: out.Levels[base].Scope}
		for _, i := range overlays {
			r.Overlays = append(r.Overlays, *out.Levels[i].Item)
		}
		return r
	}
	// lockedBy names the namespace whose lock holds the current item: the
	// base's if it is locked, else the first locked overlay's.
	lockedBy := func() string {
		if out.Levels[base].Item.Locked {
			return out.Levels[base].Namespace
		}
		for _, i := range overlays {
			if out.Levels[i].Item.Locked {
				return out.Levels[i].Namespace
			}
		}
		return ""
	}
	// one holds the single-name levels MergeWith is given.
	one := make([]Level, len(levels))
	for li, lv := range levels {
		le := &out.Levels[li]
		le.Scope, le.Namespace, le.Outcome = lv.Scope, lv.Namespace, NoItem
		one[li] = Level{Scope: lv.Scope, Namespace: lv.Namespace, Exclusions: lv.Exclusions}
		for _, ex := range lv.Exclusions {
			if !ex.Matches(resource, name) {
				continue
			}
			step := ExclusionStep{Exclusion: ex, Effect: ExclusionIdle}
			if base >= 0 {
				it := *out.Levels[base].Item
				step.Item = &it
				ok, why := ex.Excepts(it)
				switch {
				case current().Locked():
					step.Effect = ExclusionBlocked
				case !ok:
					step.Effect, step.Blocked = ExclusionRuled, why
				default:
					step.Effect = ExclusionRemoved
					out.Levels[base].Outcome, out.Levels[base].By = Excluded, lv.Namespace
					for _, i := range overlays {
						out.Levels[i].Outcome, out.Levels[i].By = Excluded, lv.Namespace
					}
					base, overlays = -1, nil
				}
			}
			le.Exclusions = append(le.Exclusions, step)
		}
		for _, it := range lv.Items {
			if it.Name != name || hidden(lv, it) {
				continue
			}
			one[li].Items = []Item{it}
			item := it
			le.Item = &item
			switch {
			case base >= 0 && out.Levels[base].Namespace == lv.Namespace:
				// MergeWith keeps the first item of a name in one namespace.
				le.Outcome, le.By = Shadowed, lv.Namespace
			case base >= 0 && o.Overlays(current(), it):
				le.Outcome, le.By = Overlaid, out.Levels[base].Namespace
				overlays = append(overlays, li)
			case base >= 0 && current().Locked():
				le.Outcome, le.By = BlockedByLock, lockedBy()
			default:
				if base >= 0 {
					out.Levels[base].Outcome, out.Levels[base].By = Shadowed, lv.Namespace
					for _, i := range overlays {
						out.Levels[i].Outcome, out.Levels[i].By = Shadowed, lv.Namespace
					}
				}
				base, overlays = li, nil
				le.Outcome = Won
			}
			break // one item of a name per namespace
		}
	}
	if res := MergeWith(resource, one, o); len(res) == 1 {
		out.Result = &res[0]
	}
	return out
}

// Winner returns the level of the trace's base item, or -1 when the name is
// not in the view.
func (e Explanation) Winner() int {
	for i, l := range e.Levels {
		if l.Outcome == Won {
			return i
		}
	}
	return -1
}

// Message says what happened at level l in words.
func (l LevelExplanation) Message() string {
	switch l.Outcome {
	case Won:
		if l.Item.FromCandidate != "" {
			return fmt.Sprintf("%s/%s is the view's item, in the version of its candidate %s", l.Item.Namespace, l.Item.Name, l.Item.FromCandidate)
		}
		return fmt.Sprintf("%s/%s is the view's item", l.Item.Namespace, l.Item.Name)
	case Shadowed:
		return fmt.Sprintf("shadowed by the item of namespace %s", l.By)
	case Overlaid:
		return fmt.Sprintf("merged field by field onto the item of namespace %s", l.By)
	case BlockedByLock:
		return fmt.Sprintf("could not shadow the item locked in namespace %s", l.By)
	case Excluded:
		return fmt.Sprintf("removed by the exclusion of namespace %s", l.By)
	default:
		return "no item of that name"
	}
}
