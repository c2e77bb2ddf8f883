package watchmux

import "sort"

// history keeps the latest view events, oldest first, so a watch can resume
// from a resourceVersion it was given. It is bounded by count: a version
// older than the oldest kept event answers 410 Gone and the client relists.
// Callers hold Mux.mu (write to add, read to replay).
type history struct {
	events []*Event // ring buffer
	start  int      // index of the oldest event
	n      int      // events held
	// floor is the version below which events may have been dropped: a
	// resume from a version >= floor is complete.
	floor uint64
}

func newHistory(size int, floor uint64) *history {
	return &history{events: make([]*Event, size), floor: floor}
}

func (h *history) addLocked(e *Event) {
	if h.n == len(h.events) {
		h.floor = h.events[h.start].RV
		h.events[h.start] = nil
		h.start = (h.start + 1) % len(h.events)
		h.n--
	}
	h.events[(h.start+h.n)%len(h.events)] = e
	h.n++
}

// sinceLocked returns the events after rv that keep accepts, and false if
// events after rv have been dropped.
func (h *history) sinceLocked(rv uint64, keep func(*Event) bool) ([]*Event, bool) {
	if rv < h.floor {
		return nil, false
	}
	// Versions increase along the ring: find the first event after rv by
	// binary search, then filter only the events after it.
	at := func(i int) *Event { return h.events[(h.start+i)%len(h.events)] }
	first := sort.Search(h.n, func(i int) bool { return at(i).RV > rv })
	var out []*Event
	for i := first; i < h.n; i++ {
		if e := at(i); keep(e) {
			out = append(out, e)
		}
	}
	return out, true
}

// lenLocked is the number of events held.
func (h *history) lenLocked() int { return h.n }
