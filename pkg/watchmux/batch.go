package watchmux

import (
	"sort"

	"k8s.io/apimachinery/pkg/util/sets"
)

// batch is one change of one item that gives the same view item to many
// namespaces: a global source edited, as every tenant sees it that neither
// holds an item of that name nor has an ancestor that does, nor excludes
// it. Such tenants' views change alike, so the change is merged once (on a
// representative member) instead of once per namespace, and is kept, in the
// history and on its way to the watchers, as one entry instead of one event
// per namespace.
//
// A batch still stands for one event per member, each with its own
// resourceVersion, consecutive in the order of namespaces, a sorted list of
// tenants, from base: the tenants that are not members (skip) have none. A
// watcher of one namespace gets its member's
// event made on demand (member); a watcher of every namespace gets the whole
// batch and expands it in its own goroutine (expand).
//
// A batch is immutable once published; namespaces is shared with the
// state's tenant list and with other batches made from the same list.
type batch struct {
	// template holds what every member's event shares: Type, Resource,
	// Name, Result and Old. Its Namespace and RV are unset.
	template Event
	// namespaces are the tenants when the change was made, sorted.
	namespaces *nameList
	// skip holds the tenants whose views the change gives something else
	// (or nothing): their events, if any, are separate.
	skip sets.Set[string]
	// skipped are the indexes in namespaces of the tenants in skip, sorted:
	// member i's version is base + i - (the skipped indexes before i).
	skipped []int
	// base is the version of the first member.
	base uint64
	// extra are the change's other events, sorted by namespace, one per
	// namespace: the exceptions merged one by one, and the global
	// namespace's own. They are numbered with the members, in namespace
	// order, so that a watcher of every namespace receives the change's
	// events in namespace order (a version inside a change says which
	// namespaces a client has seen; see pkg/resourceversion).
	extra []*Event
}

// newBatch returns the batch of the change e for the tenants but skip.
// e's Namespace and RV are not used.
func newBatch(e *Event, tenants *nameList, skip sets.Set[string]) *batch {
	b := &batch{template: *e, namespaces: tenants, skip: skip}
	b.template.Namespace, b.template.RV = "", 0
	for i, n := range tenants.names {
		if skip.Has(n) {
			b.skipped = append(b.skipped, i)
		}
	}
	return b
}

// members is the number of the batch's events, its extra ones included.
func (b *batch) members() int { return len(b.namespaces.names) - len(b.skipped) + len(b.extra) }

// number sets the version of the batch's first event to base, and the
// extra events' versions, in namespace order.
func (b *batch) number(base uint64) {
	b.base = base
	for j, x := range b.extra {
		x.RV = base + uint64(b.membersBefore(x.Namespace)+j)
	}
}

// membersBefore is the number of members whose namespace sorts before ns.
func (b *batch) membersBefore(ns string) int {
	i := sort.SearchStrings(b.namespaces.names, ns)
	return i - sort.SearchInts(b.skipped, i)
}

// extraBefore is the number of extra events whose namespace sorts before ns,
// and the extra event of ns, if any.
func (b *batch) extraBefore(ns string) (int, *Event) {
	j := sort.Search(len(b.extra), func(x int) bool { return b.extra[x].Namespace >= ns })
	if j < len(b.extra) && b.extra[j].Namespace == ns {
		return j, b.extra[j]
	}
	return j, nil
}

// nameList is an immutable sorted list of namespace names, shared by
// batches; bytes is the estimate the history charges for it, once.
type nameList struct {
	names []string
	bytes int64
}

func newNameList(names []string) *nameList {
	l := &nameList{names: names, bytes: valueBytes}
	for _, n := range names {
		l.bytes += stringBytes + int64(len(n))
	}
	return l
}

// last is the version of the batch's last namespace: the version of the
// history entry and of the event the fan-out passes on.
func (b *batch) last() uint64 { return b.base + uint64(b.members()) - 1 }

// member returns the event of namespace, if it is a member or has an
// extra event.
func (b *batch) member(namespace string) (*Event, bool) {
	j, x := b.extraBefore(namespace)
	if x != nil {
		return x, true
	}
	names := b.namespaces.names
	i := sort.SearchStrings(names, namespace)
	if i == len(names) || names[i] != namespace || b.skip.Has(namespace) {
		return nil, false
	}
	return b.event(i, i-sort.SearchInts(b.skipped, i)+j), true
}

// event makes the event of the member at index i of namespaces, the
// rank-th member.
func (b *batch) event(i, rank int) *Event {
	e := b.template
	e.Namespace = b.namespaces.names[i]
	e.RV = b.base + uint64(rank)
	e.member = true
	return &e
}

// expand calls f with each member's event after version after, in version
// order, until f returns false; it reports whether f always returned true.
func (b *batch) expand(after uint64, f func(e *Event) bool) bool {
	rank, x := 0, 0
	for i, n := range b.namespaces.names {
		for ; x < len(b.extra) && b.extra[x].Namespace <= n; x++ {
			if b.extra[x].RV > after && !f(b.extra[x]) {
				return false
			}
			rank++
		}
		if b.skip.Has(n) {
			continue
		}
		if b.base+uint64(rank) > after && !f(b.event(i, rank)) {
			return false
		}
		rank++
	}
	for ; x < len(b.extra); x++ {
		if b.extra[x].RV > after && !f(b.extra[x]) {
			return false
		}
	}
	return true
}

// batchEvent returns the event that carries b: through the history and the
// fan-out, an event with a batch stands for its members' events after
// after (those with greater versions); its RV is the batch's last.
func batchEvent(b *batch, after uint64) *Event {
	e := b.template
	e.RV = b.last()
	e.batch = b
	e.after = after
	return &e
}

// each calls f with the events e stands for, after version after: e
// itself, or a batch's members.
func (e *Event) each(after uint64, f func(e *Event) bool) bool {
	if e.batch == nil {
		if e.RV <= after {
			return true
		}
		return f(e)
	}
	return e.batch.expand(max(after, e.after), f)
}
