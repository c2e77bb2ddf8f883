package watchmux

// Progress records, for tests that feed the mux themselves, that source
// key ("namespaces", or a resource) is complete at rev, unchanged: what a
// Tracker's list or bookmark tells a mux fed through one.
func (m *Mux) Progress(key string, rev uint64) { m.progress(key, rev) }

// Listed records that a list of source key at rev found the mirror's
// state, as a Tracker's relist that changed nothing tells a mux.
func (m *Mux) Listed(key string, rev uint64) { m.listed(key, rev) }

// PastWait is pastWait, for tests that step a fake clock past it.
const PastWait = pastWait

// ApplyNamespaceAt applies a namespace change as a Tracker delivers it:
// the namespaces are complete at rev after it.
func (m *Mux) ApplyNamespaceAt(obj any, deleted bool, rev uint64) {
	m.applyNamespace(obj, deleted, rev)
}

// The fair queue of past-state lists (pastfair.go), for tests that fill it.
const (
	PastStateQPS        = pastStateQPS
	PastStateBurst      = pastStateBurst
	PastStateMaxWaiting = pastStateMaxWaiting
)

// ReplacedNames is the number of namespace names the mux remembers as
// deleted or replaced (replaced.go).
func (m *Mux) ReplacedNames() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.replaced.seq)
}
