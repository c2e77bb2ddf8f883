package watchmux

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// Event is one change of one view item: ADDED, MODIFIED or DELETED.
// Events are immutable once made and shared by every watcher and by the history.
type Event struct {
	RV        uint64
	Type      watch.EventType
	Resource  string
	Namespace string
	Name      string
	// Result is the item after the change; for DELETED, the item before it.
	Result merge.Result
	// Old is the item before a MODIFIED change, so a watcher whose selector
	// matched only one side sees ADDED or DELETED instead.
	Old *merge.Result

	// batch, when set, makes this event stand for the events of a batch's
	// members after version after (see batch); Namespace is then empty and
	// RV is the batch's last version.
	batch *batch
	after uint64
	// member says the event is a batch member's: many namespaces have
	// the same item but for its namespace, uid and resourceVersion.
	member bool

	// ver is the version shared by the events of the change, and index
	// this event's place among its namespace's events of its resource in
	// it (by name): together they print its resourceVersion (text).
	ver   *changeVersion
	index int
	// text, when set, is the resourceVersion printed instead: the initial
	// events of a watch resumed from another replica's version.
	text string
}

// Version is e's resourceVersion.
func (e *Event) Version() string {
	if e.text != "" {
		return e.text
	}
	if e.ver == nil {
		return format(e.RV)
	}
	return e.ver.text(e.Namespace, e.index, e.RV)
}

// Objects turns merge results into view objects. pkg/views implements it;
// the mux only decides which events happen.
type Objects interface {
	// Item returns the view item of r in namespace, its resourceVersion set to rv.
	Item(resource, namespace string, r merge.Result, rv string) (runtime.Object, error)
	// Empty returns an empty object of resource, for bookmarks.
	Empty(resource string) runtime.Object
}

// BatchObjects is implemented by Objects that share work between the
// namespaces of one change that all see the same item but for its
// namespace, uid and resourceVersion (a global edit, as most tenants see
// it): BatchItem is Item for such a namespace, and may return an object
// that encodes itself from an encoding shared by all of them.
type BatchObjects interface {
	BatchItem(resource, namespace string, r merge.Result, rv string) (runtime.Object, error)
}

// sameResult reports whether two results show the same view item: the same
// winning source object (informers make a new object for every change), at
// the same scope, with the same conflicts.
// With overlays, the same overlay objects too, merged into equal objects (a
// new schema may merge the same layers differently). A candidate's object
// stands in for its stable source with that source's uid, and stages a
// creation with its own: one object, two items, told apart by UID.
func sameResult(a, b merge.Result) bool {
	return a.Item.Object == b.Item.Object && a.Item.Namespace == b.Item.Namespace &&
		a.Item.UID == b.Item.UID && a.Item.FromCandidate == b.Item.FromCandidate &&
		a.Scope == b.Scope && slices.Equal(a.Conflicts, b.Conflicts) &&
		slices.EqualFunc(a.Overlays, b.Overlays, func(x, y merge.Item) bool {
			return x.Object == y.Object && x.FromCandidate == y.FromCandidate
		}) &&
		(a.Object == b.Object || equality.Semantic.DeepEqual(a.Object, b.Object))
}

// diff returns the events that turn the view before into the view after,
// both sorted by name, without resourceVersions.
func diff(resource, namespace string, before, after []merge.Result) []*Event {
	return diffWith(resource, namespace, before, after, sameResult)
}

// diffWith is diff with same telling whether two results are one item.
func diffWith(resource, namespace string, before, after []merge.Result, same func(a, b merge.Result) bool) []*Event {
	var out []*Event
	i, j := 0, 0
	for i < len(before) || j < len(after) {
		switch {
		case j == len(after) || (i < len(before) && before[i].Item.Name < after[j].Item.Name):
			out = append(out, &Event{Type: watch.Deleted, Resource: resource, Namespace: namespace, Name: before[i].Item.Name, Result: before[i]})
			i++
		case i == len(before) || after[j].Item.Name < before[i].Item.Name:
			out = append(out, &Event{Type: watch.Added, Resource: resource, Namespace: namespace, Name: after[j].Item.Name, Result: after[j]})
			j++
		default:
			if !same(before[i], after[j]) {
				old := before[i]
				out = append(out, &Event{Type: watch.Modified, Resource: resource, Namespace: namespace, Name: after[j].Item.Name, Result: after[j], Old: &old})
			}
			i++
			j++
		}
	}
	return out
}

// SameView reports whether two merges of a view, or of one item of it, each
// sorted by name, make no view event between them: a watcher would see no
// change.
func SameView(before, after []merge.Result) bool {
	return len(diff("", "", before, after)) == 0
}
