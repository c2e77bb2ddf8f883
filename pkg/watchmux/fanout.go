package watchmux

import (
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// fanOutLocked delivers events to every watcher that wants them. Called with
// fanMu held, in version order.
//
// First a non-blocking send to each watcher. Watchers whose buffer is full
// then share one time budget: the sends wait for them in turn until the
// budget is spent. After that, each watcher still waiting gets one more
// non-blocking try per event, as kube-apiserver's cacher gives it, and only
// one whose buffer is still full is closed: a watcher that drained its
// buffer while the budget was spent on another that never reads keeps
// watching. A closed watcher reconnects with the last version it received
// and resumes from the history.
func (m *Mux) fanOutLocked(events []*Event) {
	// Only the watchers of the namespaces the events are in, and those of
	// every namespace, are looked at, each at its own events: the cost of a
	// fan-out is the events plus the deliveries, not watchers × events. A
	// batch goes whole to the watchers of every namespace, and as its
	// members' events to the watchers of those namespaces: the watched
	// namespaces are looked up among its members, so a batch costs the
	// watched namespaces, not its members.
	m.wmu.Lock()
	byNamespace := map[string][]*Event{}
	for _, e := range events {
		if e.batch == nil {
			byNamespace[e.Namespace] = append(byNamespace[e.Namespace], e)
			continue
		}
		for ns := range m.byNamespace {
			if member, ok := e.batch.member(ns); ok {
				byNamespace[ns] = append(byNamespace[ns], member)
			}
		}
	}
	ws := make([]*watcher, 0, len(m.allNamespaces))
	for w := range m.allNamespaces {
		ws = append(ws, w)
	}
	everyNamespace := len(ws)
	for ns := range byNamespace {
		ws = append(ws, m.byNamespace[ns]...)
	}
	m.wmu.Unlock()
	// The watchers of every namespace first, as before; then the others
	// connection by connection (connection.go).
	byConnection(ws[everyNamespace:])

	type pending struct {
		w      *watcher
		events []*Event
	}
	var slow []pending
	for _, w := range ws {
		mine := events
		if w.opts.Namespace != "" {
			mine = byNamespace[w.opts.Namespace]
		}
		for i, e := range mine {
			if e.RV <= w.startRV || !w.wants(e) {
				continue
			}
			if r := w.trySend(e); r == sendFull {
				slow = append(slow, pending{w: w, events: w.filter(mine[i:])})
			} else if r == sendOK {
				continue
			}
			break
		}
	}
	if len(slow) == 0 {
		return
	}
	timer := m.opts.Clock.NewTimer(m.opts.SlowBudget)
	defer timer.Stop()
	expired := false
	for _, p := range slow {
		for _, e := range p.events {
			if expired {
				// The budget is spent: one more try, no waiting.
				if r := p.w.trySend(e); r == sendOK {
					continue
				} else if r == sendFull {
					m.closeSlow(p.w)
				}
				break
			}
			sent := false
			if !p.w.wire.hold() {
				break
			}
			select {
			case p.w.ch <- e:
				sent = true
			case <-p.w.done:
			case <-timer.C():
				expired = true
				m.closeSlow(p.w)
			}
			if !sent {
				p.w.wire.release(true)
				break
			}
		}
	}
}

// sendResult is the outcome of a non-blocking send to a watcher.
type sendResult int

const (
	sendOK   sendResult = iota // in the buffer
	sendFull                   // the buffer is full
	sendDone                   // the watcher has stopped
)

// trySend puts e in the watcher's buffer if it has room, without waiting,
// holding the watcher's connection until run hands e on (wire.go).
func (w *watcher) trySend(e *Event) sendResult {
	if !w.wire.hold() {
		return sendDone
	}
	select {
	case w.ch <- e:
		return sendOK
	case <-w.done:
		w.wire.release(true)
		return sendDone
	default:
		w.wire.release(true)
		return sendFull
	}
}

// filter returns the events among events this watcher wants.
func (w *watcher) filter(events []*Event) []*Event {
	var out []*Event
	for _, e := range events {
		if e.RV > w.startRV && w.wants(e) {
			out = append(out, e)
		}
	}
	return out
}

func (m *Mux) closeSlow(w *watcher) {
	select {
	case <-w.done:
		return
	default:
	}
	klog.V(2).InfoS("Closing a watcher too slow to keep up", "resource", w.opts.Resource, "namespace", w.opts.Namespace)
	slowWatchersClosed.Inc()
	w.Stop()
}

// bookmark sends a BOOKMARK to every watcher that asked for them and has
// room (a full buffer skips it), even one whose view has been quiet since
// it started: kube-apiserver's cacher sends them that way, and they are how
// clients keep their version fresh. It carries the current version when
// every change stamped so far has been fanned out (the state each watcher
// holds once it has read its buffer), else the last fanned-out change's: a
// bookmark never names a state whose events are still to come. A watcher
// that started at a later state than the bookmark's gets none.
func (m *Mux) bookmark() {
	m.mu.RLock()
	if !m.synced {
		m.mu.RUnlock()
		return
	}
	e := &Event{RV: m.v.current(), Type: watch.Bookmark, text: m.currentTextLocked()}
	vector := m.pos.vector()
	ticket := m.nextTicket
	m.mu.RUnlock()

	m.fanMu.Lock()
	defer m.fanMu.Unlock()
	if m.serving != ticket {
		// Changes stamped before the snapshot are still to be fanned out,
		// or one stamped after it was: the last fanned out is the state.
		e = &Event{RV: m.dispatched, Type: watch.Bookmark, ver: m.dispatchedVer}
		vector = m.dispatchedVer.vector
	}
	m.wmu.Lock()
	defer m.wmu.Unlock()
	for w := range m.watchers {
		if !w.opts.AllowBookmarks || !bookmarkAfterStart(e.RV, vector, w) {
			continue
		}
		w.trySend(e)
	}
}

// bookmarkAfterStart reports whether a bookmark of the state at seq and
// vector is at or after w's start. Across a change of the sources (the
// vector's layout), only a later sequence number orders them.
func bookmarkAfterStart(seq uint64, vector []uint64, w *watcher) bool {
	if len(vector) != len(w.startVector) {
		return seq > w.startRV
	}
	return seq >= w.startRV && rv.AtLeast(vector, w.startVector)
}

// closeAll ends every watcher.
func (m *Mux) closeAll() {
	m.wmu.Lock()
	ws := make([]*watcher, 0, len(m.watchers))
	for w := range m.watchers {
		ws = append(ws, w)
	}
	m.wmu.Unlock()
	for _, w := range ws {
		w.Stop()
	}
}
