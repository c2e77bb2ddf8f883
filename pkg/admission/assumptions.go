package admission

import (
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// NamespaceIndex is what the guards ask of the mirror about one namespace:
// its labels and annotations (whether an assumed change still stands, or
// the mirror shows another), and whether it is being deleted.
type NamespaceIndex interface {
	// NamespaceMeta is the labels and annotations the mirror holds of
	// namespace (found: it holds the namespace).
	NamespaceMeta(namespace string) (meta whatif.NamespaceMeta, found bool)
	// Terminating reports whether namespace is being deleted.
	Terminating(namespace string) bool
}

// assumption is a namespace change the parent guard admitted: the labels
// and annotations it set, and those it replaced (old is nil for a creation).
type assumption struct {
	meta  whatif.NamespaceMeta
	old   *whatif.NamespaceMeta
	until time.Time
	// older are the versions the changes assumed before it replaced, when
	// it was admitted over them before the mirror showed them: a mirror
	// showing one of those lags behind, it shows nothing newer.
	older []whatif.NamespaceMeta
}

// put records as for name, with mu held. Admitted over a change still
// assumed (whose labels as found), it keeps what that one replaced too;
// made again over the version a change assumed replaced, what that one
// kept. A change this replica's mirror showed land counts too: another
// replica's mirror may lag behind the version it replaced, and must take
// that version, as it takes as.old, for one not showing as yet (shared
// record, shared_memory.go). A creation replaced no version: absent
// (Gone) stands for it.
func (a *assumptions) put(name string, as assumption) {
	prev, ok := a.byName[name]
	if ok && as.old != nil && !a.clock.Now().After(prev.until) {
		switch {
		case hierarchyKeys(prev.meta) == hierarchyKeys(*as.old) && !prev.meta.Gone:
			was := whatif.NamespaceMeta{Gone: true}
			if prev.old != nil {
				was = *prev.old
			}
			as.older = append(append([]whatif.NamespaceMeta(nil), prev.older...), was)
		case prev.old != nil && hierarchyKeys(*prev.old) == hierarchyKeys(*as.old):
			as.older = append([]whatif.NamespaceMeta(nil), prev.older...)
		}
		if n := len(as.older); n > maxOlder {
			as.older = as.older[n-maxOlder:]
		}
	}
	as.until = laterThan(prev.until, ok, as.until)
	a.byName[name] = as
}

// laterThan is until, or just after prev when that ends as late (prev
// exists): the record keeps the later entry of one key (mergeRecords), and
// an entry another replica wrote, by its clock, may end later than one
// admitted over it here. Extended so, an entry outlives its ttl by at most
// the replicas' clock skew.
func laterThan(prev time.Time, exists bool, until time.Time) time.Time {
	if exists && !until.After(prev) {
		return prev.Add(time.Nanosecond)
	}
	return until
}

// maxOlder bounds the versions an assumption keeps that it was admitted
// over: a mirror further behind takes the assumption as superseded.
const maxOlder = 16

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
// invariant). The replicas share them through the record their decisions
// take turns on (shared.go).
type assumptions struct {
	mu sync.Mutex
	// mirror shows which assumed changes landed, or were superseded.
	mirror NamespaceIndex
	clock  clock.PassiveClock
	ttl    time.Duration
	byName map[string]assumption
}

// currentLocked returns the assumptions that still stand: not expired, and
// the mirror still shows the namespace as the assumed change found it. A
// superseded one is kept until it expires (not returned): a change admitted
// over it keeps the version it replaced (put). Called with mu held.
func (a *assumptions) currentLocked() whatif.Assumed {
	now := a.clock.Now()
	out := whatif.Assumed{}
	for name, as := range a.byName {
		if now.After(as.until) {
			delete(a.byName, name)
			continue
		}
		if !a.superseded(name, as) {
			out[name] = as.meta
		}
	}
	return out
}

// undeletedLocked is currentLocked with every namespace assumed gone taken
// as it was when its deletion was admitted (the assumption's old): a
// deletion may still be refused by another webhook, and the namespace stay.
// Applied, a namespace assumed gone has no subtree to lose anything; so the
// losses of a change are also judged this way, in which what it passes down
// still reaches what lies below it. Called with mu held.
func (a *assumptions) undeletedLocked() whatif.Assumed {
	out := a.currentLocked()
	for name, m := range out {
		if !m.Gone {
			continue
		}
		if as := a.byName[name]; as.old != nil {
			out[name] = cloneMeta(*as.old)
		} else {
			delete(out, name)
		}
	}
	return out
}

// waysLocked returns currentLocked and undeletedLocked, the assumptions
// a change is judged with besides the mirror alone. Called with mu held.
func (a *assumptions) waysLocked() (assumed, undeleted whatif.Assumed) {
	return a.currentLocked(), a.undeletedLocked()
}

// superseded reports whether the mirror shows namespace name at another
// version than the one the assumed change replaced.
func (a *assumptions) superseded(name string, as assumption) bool {
	cur, found := a.mirror.NamespaceMeta(name)
	if as.old == nil {
		return found
	}
	if as.meta.Gone {
		return !found // gone from the mirror too
	}
	if !found {
		// Absent: past a deletion, or behind the creation of a version
		// the change was admitted over.
		return !slices.ContainsFunc(as.older, func(o whatif.NamespaceMeta) bool { return o.Gone })
	}
	for _, o := range append([]whatif.NamespaceMeta{*as.old}, as.older...) {
		if !o.Gone && hierarchyKeys(cur) == hierarchyKeys(o) {
			return false
		}
	}
	return true
}

// hierarchyKeys are the labels and annotations of a namespace that merging
// reads, as one comparable value.
func hierarchyKeys(m whatif.NamespaceMeta) [5]string {
	uid, has := m.Annotations[v1alpha1.AnnotationParentUID]
	if has {
		uid = "=" + uid
	}
	stage, hasStage := m.Labels[v1alpha1.LabelStage]
	if hasStage {
		stage = "=" + stage
	}
	return [5]string{m.Labels[v1alpha1.LabelParent], m.Labels[v1alpha1.LabelInherit], uid, exclusionKey(m.Annotations), stage}
}

// exclusionKey is one string for every exclusion annotation of a namespace
// (merge.ExclusionAnnotations), each present one's value after its name.
func exclusionKey(annotations map[string]string) string {
	var b strings.Builder
	for _, k := range merge.ExclusionAnnotations {
		if v, ok := annotations[k]; ok {
			b.WriteString(k + "=" + v + "\x00")
		}
	}
	return b.String()
}
