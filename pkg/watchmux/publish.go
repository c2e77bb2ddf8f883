package watchmux

import (
	"sort"
	"time"
)

// Publishing: a change's events are stamped with versions and kept in the
// history under mu (stampLocked); the change then releases mu and fans them
// out in its turn (fanOutInTurn), so that events reach watchers in version
// order while reads and the next changes go on.

// stampLocked stamps events with versions, keeps them in the history,
// records the namespaces' generations, signals Changed and takes the
// ticket of the events' fan-out. It reports false when there is nothing to
// fan out: no events, or the versions ran out (every watcher is closed
// then). Called with mu held for writing; the caller releases it, then
// calls fanOutInTurn with the ticket.
//
// k is the source whose change made the events, and prev its revision
// before (k < 0: a change of configuration): the events' versions name the
// upstream state after the change, and each one's place in it.
func (m *Mux) stampLocked(events []*Event, k int, prev uint64) (ticket uint64, fanOut bool) {
	var cv *changeVersion
	if len(events) > 0 {
		cv = m.versionEventsLocked(events, k, prev)
	}
	for _, e := range events {
		var rv uint64
		var ok bool
		e.ver = cv
		if e.batch != nil {
			// One version per member, as for separate events.
			var base uint64
			base, ok = m.v.reserve(uint64(e.batch.members()))
			if ok {
				e.batch.template.ver = cv
				e.batch.number(base)
				for _, x := range e.batch.extra {
					x.ver = cv
					m.generationLocked(x.Namespace, x.RV)
				}
			}
			rv = e.batch.last()
		} else {
			rv, ok = m.v.next()
		}
		if !ok {
			// 2^40 events: start over as a new instance; every watcher
			// relists. Bookmarks carry the new instance's versions only,
			// and none reaches a watcher of the old one: it is closed
			// before the fan-out lock is released.
			m.v = newVersionsExcept(m.v.instance)
			m.hist = newHistory(m.opts.HistorySize, m.opts.HistoryBytes, m.v.current())
			// The new instance's numbers start over: the old one's
			// replacements are before all of them (replaced.go).
			m.replaced = replacedNamespaces{}
			m.fanMu.Lock()
			// Let the fan-outs already numbered finish first: no event of
			// the old instance may reach a watcher of the new one.
			for m.serving != m.nextTicket {
				m.fanTurn.Wait()
			}
			m.dispatched = m.v.current()
			m.closeAll()
			m.fanMu.Unlock()
			return 0, false
		}
		e.RV = rv
		m.hist.addLocked(e)
		if e.batch != nil {
			// The members' generations are not set one by one: every
			// lineage's generation holds the global namespace's, which
			// stands for them (LineageGeneration).
			m.st.generations[m.st.globalFor(e.Resource)] = rv
		} else {
			m.generationLocked(e.Namespace, rv)
		}
	}
	if m.synced {
		m.signalChanged()
	}
	if len(events) == 0 {
		return 0, false
	}
	// Fan-outs run one at a time in version order, but without the state
	// lock: the ticket, taken under it, is this change's turn.
	ticket = m.nextTicket
	m.nextTicket++
	return ticket, true
}

// generationLocked records rv as namespace's generation (LineageGeneration).
func (m *Mux) generationLocked(namespace string, rv uint64) {
	if _, exists := m.st.namespaces[namespace]; exists || m.st.isGlobal(namespace) {
		m.st.generations[namespace] = rv
	} else {
		delete(m.st.generations, namespace)
	}
}

// versionEventsLocked orders a change's events by namespace, resource and
// name (a batch stands alone, its members and extra events in namespace
// order already), numbers each one among its namespace's events of its
// resource, and returns their shared version: the vector after the change.
func (m *Mux) versionEventsLocked(events []*Event, k int, prev uint64) *changeVersion {
	if len(events) > 1 {
		sort.SliceStable(events, func(i, j int) bool {
			a, b := events[i], events[j]
			if a.Namespace != b.Namespace {
				return a.Namespace < b.Namespace
			}
			if a.Resource != b.Resource {
				return a.Resource < b.Resource
			}
			return a.Name < b.Name
		})
		type key struct{ namespace, resource string }
		counts := map[key]int{}
		for _, e := range events {
			kk := key{e.Namespace, e.Resource}
			e.index = counts[kk]
			counts[kk]++
		}
	}
	return newChangeVersion(m.st.fingerprint(m.pos), m.pos.vector(), k, prev, k < 0 || len(events) == 1 && events[0].batch == nil)
}

// fanOutInTurn waits for ticket's turn, fans events out, and passes the turn
// on. Called without mu: reads and the next changes go on while a fan-out
// waits for a slow watcher. start is when the change arrived.
func (m *Mux) fanOutInTurn(ticket uint64, events []*Event, start time.Time) {
	m.fanMu.Lock()
	defer m.fanMu.Unlock()
	for m.serving != ticket {
		m.fanTurn.Wait()
	}
	m.fanOutLocked(events)
	m.dispatched = events[len(events)-1].RV
	m.dispatchedVer = events[len(events)-1].ver.after()
	m.serving++
	m.fanTurn.Broadcast()
	fanOutLatency.Observe(m.opts.Clock.Since(start).Seconds())
}

// signalChanged wakes the reader of Changed, without blocking (the signal
// coalesces), and every waiter on NextChange.
func (m *Mux) signalChanged() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
	m.nextMu.Lock()
	close(m.next)
	m.next = make(chan struct{})
	m.nextMu.Unlock()
}
