package watchmux

import (
	"reflect"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// Defaults of the history's bounds (Options.HistorySize, Options.HistoryBytes).
const (
	DefaultHistorySize  = 100_000
	DefaultHistoryBytes = 256 << 20
)

// history keeps the latest view events, oldest first, so a watch can resume
// from a resourceVersion it was given. It is bounded by count and by an
// estimate of the bytes the events pin: a version older than the oldest
// kept event answers 410 Gone and the client relists.
//
// The byte estimate (eventBytes) counts each event's own fields and every
// object it references, once per object however many events share it: a
// global source changed once makes an event in every namespace that
// inherits it, all pointing at the same object, and that object is charged
// once, while the merged objects of an Overlay kind, one per namespace, are
// each charged. An object is charged from the first kept event that
// references it to the last.
//
// Callers hold Mux.mu (write to add, read to replay).
type history struct {
	events []*Event // ring buffer
	start  int      // index of the oldest event
	n      int      // events held
	// floor is the version below which events may have been dropped: a
	// resume from a version >= floor is complete.
	floor uint64

	maxBytes int64
	bytes    int64 // estimated bytes the events held pin
	// objects counts the kept events' references to each object (by
	// pointer), to charge each object once.
	objects map[any]int
}

// newHistory returns a history of at most size events (DefaultHistorySize if
// <= 0) and maxBytes estimated bytes (DefaultHistoryBytes if <= 0), complete
// from floor.
func newHistory(size int, maxBytes int64, floor uint64) *history {
	if size <= 0 {
		size = DefaultHistorySize
	}
	if maxBytes <= 0 {
		maxBytes = DefaultHistoryBytes
	}
	h := &history{events: make([]*Event, size), floor: floor, maxBytes: maxBytes, objects: map[any]int{}}
	h.reportLocked()
	return h
}

func (h *history) addLocked(e *Event) {
	if h.n == len(h.events) {
		h.dropOldestLocked()
	}
	h.events[(h.start+h.n)%len(h.events)] = e
	h.n++
	h.bytes += h.chargeLocked(e, 1)
	// The newest event goes too when it alone is over the bound: the
	// floor then says a resume from before it is incomplete.
	for h.bytes > h.maxBytes && h.n > 0 {
		h.dropOldestLocked()
	}
	h.reportLocked()
}

// dropOldestLocked forgets the oldest event; the floor becomes its version.
func (h *history) dropOldestLocked() {
	e := h.events[h.start]
	h.floor = e.RV
	h.bytes -= h.chargeLocked(e, -1)
	h.events[h.start] = nil
	h.start = (h.start + 1) % len(h.events)
	h.n--
}

// chargeLocked adds delta (1 or -1) to the references of e's objects and
// returns the bytes that changes: e's own and, for each object, its
// estimate when its first reference is added or its last is removed.
func (h *history) chargeLocked(e *Event, delta int) int64 {
	n := eventOverhead + int64(len(e.Resource)+len(e.Namespace)+len(e.Name))
	if b := e.batch; b != nil {
		// The members' names are shared by the batches made from the same
		// tenant list: charged once.
		n += int64(b.skip.Len())*stringBytes + h.chargeObjectLocked(b.namespaces, delta)
		for _, x := range b.extra {
			n += h.chargeLocked(x, delta)
		}
	}
	n += h.chargeResultLocked(e.Result, delta)
	if e.Old != nil {
		n += h.chargeResultLocked(*e.Old, delta)
	}
	return n
}

func (h *history) chargeResultLocked(r merge.Result, delta int) int64 {
	var n int64
	for _, c := range r.Conflicts {
		n += stringBytes + int64(len(c))
	}
	n += h.chargeObjectLocked(r.Item.Object, delta) + h.chargeObjectLocked(r.Object, delta)
	for _, o := range r.Overlays {
		n += itemOverhead + h.chargeObjectLocked(o.Object, delta)
	}
	return n
}

// chargeObjectLocked counts a reference to o. Objects that are not pointers
// can't be shared: each reference is charged.
func (h *history) chargeObjectLocked(o any, delta int) int64 {
	if o == nil {
		return 0
	}
	if reflect.TypeOf(o).Kind() != reflect.Pointer {
		return objectBytes(o)
	}
	refs := h.objects[o] + delta
	switch {
	case refs == 0:
		delete(h.objects, o)
		return objectBytes(o)
	case refs == 1 && delta > 0:
		h.objects[o] = refs
		return objectBytes(o)
	default:
		h.objects[o] = refs
		return 0
	}
}

// sinceLocked returns the events after rv that keep accepts, and false if
// events after rv have been dropped. For a watcher of one namespace
// (namespace set), a batch gives that namespace's event, if it is a member;
// for a watcher of every namespace, it stays one event standing for its
// members after rv.
func (h *history) sinceLocked(rv uint64, namespace string, keep func(*Event) bool) ([]*Event, bool) {
	if rv < h.floor {
		return nil, false
	}
	// Versions increase along the ring: find the first event after rv by
	// binary search, then filter only the events after it.
	at := func(i int) *Event { return h.events[(h.start+i)%len(h.events)] }
	first := sort.Search(h.n, func(i int) bool { return at(i).RV > rv })
	var out []*Event
	for i := first; i < h.n; i++ {
		e := at(i)
		switch {
		case e.batch == nil:
		case namespace != "":
			var member bool
			if e, member = e.batch.member(namespace); !member || e.RV <= rv {
				continue
			}
		case rv >= e.batch.base:
			// Part of the batch was seen: only the members after rv.
			e = batchEvent(e.batch, rv)
		}
		if keep(e) {
			out = append(out, e)
		}
	}
	return out, true
}

// lenLocked is the number of events held.
func (h *history) lenLocked() int { return h.n }

// bytesLocked is the estimate of the bytes the events held pin.
func (h *history) bytesLocked() int64 { return h.bytes }

// Estimates of what the history's events and their objects take.
const (
	// eventOverhead is an Event with its Result (and an Old one), the ring
	// slot and the bookkeeping of its objects.
	eventOverhead = 512
	// itemOverhead is a merge.Item in a Result's Overlays.
	itemOverhead = 96
	// stringBytes is a string's header.
	stringBytes = 16
	// valueBytes is a value in an unstructured object: an interface and,
	// in a map, its slot.
	valueBytes = 48
	// unknownObjectBytes is charged for an object of no known kind.
	unknownObjectBytes = 1 << 10
)

// objectBytes estimates an object's size: its protobuf size for the
// built-in kinds, a walk of the content for unstructured objects (the
// configured kinds, and the objects Overlay merges make). It is of the order
// of the object's serialized size; the Go heap it takes is a small multiple
// of that (maps and headers), so the estimate errs low, and the flag's bound
// is an order of magnitude, not an exact limit.
func objectBytes(o any) int64 {
	switch o := o.(type) {
	case *nameList:
		return o.bytes
	case *unstructured.Unstructured:
		return valueBytes + contentBytes(o.Object)
	case *unstructured.UnstructuredList:
		n := valueBytes + contentBytes(o.Object)
		for i := range o.Items {
			n += valueBytes + contentBytes(o.Items[i].Object)
		}
		return n
	case interface{ Size() int }:
		return valueBytes + int64(o.Size())
	default:
		return unknownObjectBytes
	}
}

// contentBytes estimates the bytes of an unstructured value.
func contentBytes(v any) int64 {
	switch v := v.(type) {
	case map[string]any:
		n := int64(valueBytes)
		for k, x := range v {
			n += stringBytes + int64(len(k)) + contentBytes(x)
		}
		return n
	case []any:
		n := int64(valueBytes)
		for _, x := range v {
			n += contentBytes(x)
		}
		return n
	case string:
		return valueBytes + int64(len(v))
	default:
		return valueBytes
	}
}
