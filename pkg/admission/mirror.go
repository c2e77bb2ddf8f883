package admission

import (
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
)

// Mirror is what the guards read of the sources, by the questions each asks:
// every field is a few questions, declared by the guard that asks them. One
// *whatif.Index, the what-if index over the watch multiplexer's mirror,
// answers them all (MirrorOf); the unit tests answer them with fakes.
type Mirror struct {
	// Sources: whether a source is locked (guards.go).
	Sources LockedSources
	// Candidates: a namespace's candidates and their reach (candidates.go).
	Candidates CandidateIndex
	// Locks: what locking a source would do below it (locks.go).
	Locks LockIndex
	// Inheritance: the item a namespace inherits under a name (shadows.go).
	Inheritance InheritanceIndex
	// Reach: the namespaces a source's change reaches (fanout.go).
	Reach ReachIndex
	// Parents: whether a namespace can be a parent (hierarchy_checks.go).
	Parents ParentIndex
	// Losses: the locked items a change of a namespace, or its deletion,
	// takes from views (hierarchy_judge.go, namespace_deletions.go).
	Losses LossIndex
	// Namespaces: a namespace as the mirror holds it (assumptions.go).
	Namespaces NamespaceIndex
	// Exceptions: what a namespace inherits, whatever excludes it
	// (exceptions.go).
	Exceptions ExceptionIndex
	// Synced: whether the mirror holds every namespace and source yet
	// (handler.go); nil: taken as synced.
	Synced SyncIndex
}

// MirrorOf asks every question of the guards of x.
func MirrorOf(x *whatif.Index) Mirror {
	return Mirror{
		Sources: x, Candidates: x, Locks: x, Inheritance: x, Reach: x,
		Parents: x, Losses: x, Namespaces: x, Exceptions: x, Synced: x,
	}
}
