package watchmux

import "time"

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
func (m *Mux) stampLocked(events []*Event) (ticket uint64, fanOut bool) {
	for _, e := range events {
		var rv uint64
		var ok bool
		if e.batch != nil {
			// One version per member, as for separate events.
			e.batch.base, ok = m.v.reserve(uint64(e.batch.members()))
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
		} else if _, exists := m.st.namespaces[e.Namespace]; exists || m.st.isGlobal(e.Namespace) {
			m.st.generations[e.Namespace] = rv
		} else {
			delete(m.st.generations, e.Namespace)
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
	m.serving++
	m.fanTurn.Broadcast()
	fanOutLatency.Observe(m.opts.Clock.Since(start).Seconds())
}

// signalChanged wakes the reader of Changed, without blocking: the signal
// coalesces.
func (m *Mux) signalChanged() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}
