package watchmux

import (
	"slices"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// A namespace deleted and created again under the same name (another uid)
// is another namespace, perhaps someone else's: a past view of the old one
// is not served to a watch of the new one (sameNamespace answers 410). The
// history holds the old namespace's events too (its items added, edited,
// deleted), so a namespaced watch from a version before the replacement is
// not served from it either, but as any replica without that history
// serves it: from the state at its vector, which answers 410 when the
// namespace it names is not today's.

// replacedNamespaces records, by namespace name, the last sequence number
// of the change that deleted or replaced the namespace of that name. Its
// entries older than the history's floor are dropped as it grows: the
// history can't serve those versions anyway. A namespace with no view
// item stamps no event, so names churned (a CI's, created and deleted)
// need not move that floor: past maxReplaced names, the oldest are
// forgotten and floor stands for them.
type replacedNamespaces struct {
	seq map[string]uint64
	// prune is the size at which entries below the floor are dropped next.
	prune int
	// floor is the last sequence number of the names forgotten past
	// maxReplaced: a client from before it is served no namespaced watch
	// from the history (but as a replica without it serves one).
	floor uint64
}

// maxReplaced bounds the names remembered.
const maxReplaced = 4096

// replacingLocked reports whether setting namespace name to next (nil:
// deleted) deletes or replaces the namespace of that name. Called with mu
// held.
func (m *Mux) replacingLocked(name string, next *merge.Namespace) bool {
	old, ok := m.st.namespaces[name]
	return ok && (next == nil || next.UID != old.UID)
}

// noteReplacedLocked records that the change just stamped deleted or
// replaced namespace name. Called with mu held for writing.
func (m *Mux) noteReplacedLocked(name string) {
	r := &m.replaced
	if r.seq == nil {
		r.seq = map[string]uint64{}
	}
	r.seq[name] = m.v.current()
	if len(r.seq) < min(max(r.prune, 1024), maxReplaced+1) {
		return
	}
	if m.hist != nil {
		for n, seq := range r.seq {
			if seq < m.hist.floor {
				delete(r.seq, n)
			}
		}
	}
	if len(r.seq) > maxReplaced {
		seqs := make([]uint64, 0, len(r.seq))
		for _, seq := range r.seq {
			seqs = append(seqs, seq)
		}
		slices.Sort(seqs)
		cut := seqs[len(seqs)-maxReplaced/2-1] // keep the newer half at most
		for n, seq := range r.seq {
			if seq <= cut {
				delete(r.seq, n)
			}
		}
		r.floor = max(r.floor, cut)
	}
	r.prune = 2 * len(r.seq)
}

// replacedSinceLocked reports whether namespace (not "") exists and a
// namespace of its name was deleted or replaced after sequence number seq:
// a client at seq has not had every event of that change, and holds (part
// of) the old one's view. Called with mu held.
func (m *Mux) replacedSinceLocked(namespace string, seq uint64) bool {
	if namespace == "" {
		return false
	}
	if _, exists := m.st.namespaces[namespace]; !exists {
		return false
	}
	last, ok := m.replaced.seq[namespace]
	return seq < m.replaced.floor || ok && seq < last
}
