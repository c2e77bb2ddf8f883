package watchmux

import (
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"
)

// fanOutLocked delivers events to every watcher that wants them. Called with
// fanMu held, in version order.
//
// First a non-blocking send to each watcher. Watchers whose buffer is full
// then share one time budget: the sends wait for them in turn until the
// budget is spent, and a watcher still full after that is closed. It
// reconnects with the last version it received and resumes from the history.
func (m *Mux) fanOutLocked(events []*Event) {
	// Only the watchers of the namespaces the events are in, and those of
	// every namespace, are looked at, each at its own events: the cost of a
	// fan-out is the events plus the deliveries, not watchers × events.
	byNamespace := map[string][]*Event{}
	for _, e := range events {
		byNamespace[e.Namespace] = append(byNamespace[e.Namespace], e)
	}
	m.wmu.Lock()
	ws := make([]*watcher, 0, len(m.allNamespaces))
	for w := range m.allNamespaces {
		ws = append(ws, w)
	}
	for ns := range byNamespace {
		for w := range m.byNamespace[ns] {
			ws = append(ws, w)
		}
	}
	m.wmu.Unlock()

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
			select {
			case w.ch <- e:
				continue
			case <-w.done:
			default:
				slow = append(slow, pending{w: w, events: w.filter(mine[i:])})
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
	send:
		for _, e := range p.events {
			if expired {
				m.closeSlow(p.w)
				break
			}
			select {
			case p.w.ch <- e:
			case <-p.w.done:
				break send
			case <-timer.C():
				expired = true
				m.closeSlow(p.w)
				break send
			}
		}
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

// bookmark sends a BOOKMARK at the last dispatched version to every watcher
// that asked for them and has room; a full buffer skips it.
func (m *Mux) bookmark() {
	m.fanMu.Lock()
	defer m.fanMu.Unlock()
	if m.dispatched == 0 {
		return
	}
	e := &Event{RV: m.dispatched, Type: watch.Bookmark}
	m.wmu.Lock()
	defer m.wmu.Unlock()
	for w := range m.watchers {
		if !w.opts.AllowBookmarks || e.RV <= w.startRV {
			continue
		}
		select {
		case w.ch <- e:
		default:
		}
	}
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
