package watchmux

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// Frozen is one resource's mirror at one version, copied out of the lock
// so that a list can merge its views namespace by namespace while it is
// encoded, holding one namespace's items at a time instead of the whole
// view. It holds the sources and namespaces (what the views are merged
// from), never the merged items: its size is the sources', not the
// namespaces × inherited items product. Lists at the same version share
// one (Mux.Freeze). Safe for concurrent use; read only.
type Frozen struct {
	st       *state
	resource string
	version  string
	// keys are the namespaces in storage key order ("namespace/"): the
	// order of a list's items across namespaces; names, sorted by name.
	keys, names []string

	mu sync.Mutex
	// counts caches each namespace's number of view items (no name).
	counts map[string]int
}

// Freeze returns resource's mirror at the current version, the one
// already frozen at that version when there is one (every list at the
// same state shares it).
func (m *Mux) Freeze(resource string) (*Frozen, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.synced {
		return nil, errNotSynced
	}
	return m.freezeLocked(resource), nil
}

// freezeLocked is Freeze with mu held (read).
func (m *Mux) freezeLocked(resource string) *Frozen {
	version := m.currentTextLocked()
	m.frozenMu.Lock()
	defer m.frozenMu.Unlock()
	if f := m.frozen[resource]; f != nil && f.version == version {
		return f
	}
	f := &Frozen{st: m.st.freeze(resource), resource: resource, version: version, counts: map[string]int{}}
	f.names = f.st.namespaceNames()
	f.keys = slices.Clone(f.names)
	sort.Slice(f.keys, func(i, j int) bool { return f.keys[i]+"/" < f.keys[j]+"/" })
	if m.frozen == nil {
		m.frozen = map[string]*Frozen{}
	}
	// Only the latest is kept here: a list holds its own while it runs,
	// a paginated list's snapshot for its continuations, and a watch-list
	// until its initial events are sent.
	m.frozen[resource] = f
	return f
}

// Version is the resourceVersion the frozen state is at.
func (f *Frozen) Version() string { return f.version }

// Namespaces are the namespaces in storage key order: sorted by
// "namespace/", which differs from sorted names where a name continues
// another's with a byte below '/' ('-', '.').
func (f *Frozen) Namespaces() []string { return f.keys }

// Results merges namespace's view, or only item name when set, sorted by name.
func (f *Frozen) Results(namespace, name string) []merge.Result {
	return f.st.results(f.resource, namespace, name)
}

// Count is the number of items of namespace's view, merged once.
func (f *Frozen) Count(namespace string) int {
	f.mu.Lock()
	n, ok := f.counts[namespace]
	f.mu.Unlock()
	if ok {
		return n
	}
	n = len(f.Results(namespace, ""))
	f.mu.Lock()
	f.counts[namespace] = n
	f.mu.Unlock()
	return n
}

// freeze copies what merging resource's views reads: the namespaces, the
// resource's sources and candidates, the policy, globals and options. The
// items and namespace objects are shared: the feed replaces them, never
// changes them. Called with Mux.mu held (read).
func (s *state) freeze(resource string) *state {
	f := &state{
		policy:      s.policy,
		resources:   []string{resource},
		options:     map[string]merge.Options{resource: s.options[resource]},
		globals:     maps.Clone(s.globals),
		pending:     sets.New[string](),
		namespaces:  maps.Clone(s.namespaces),
		sources:     map[string]map[string]map[string]merge.Item{},
		candidates:  map[string]map[candidateKey]sets.Set[string]{},
		terminating: s.terminating.Clone(),
		lineages:    map[string]merge.Lineage{},
	}
	if f.globals == nil {
		f.globals = map[string]string{}
	}
	byNS := make(map[string]map[string]merge.Item, len(s.sources[resource]))
	for ns, items := range s.sources[resource] {
		byNS[ns] = maps.Clone(items)
	}
	f.sources[resource] = byNS
	cands := make(map[candidateKey]sets.Set[string], len(s.candidates[resource]))
	for k, names := range s.candidates[resource] {
		cands[k] = names.Clone()
	}
	f.candidates[resource] = cands
	// The resolved lineages are current (a namespace change drops those
	// it changes under the write lock): the copy starts with them.
	s.lineMu.Lock()
	f.lineages = maps.Clone(s.lineages)
	s.lineMu.Unlock()
	if f.lineages == nil {
		f.lineages = map[string]merge.Lineage{}
	}
	return f
}

// After returns the index in keys of the first namespace with a key
// after start (a storage key "namespace/name"), and the name in that
// namespace after which its items follow start ("" for all of them).
func (f *Frozen) After(start string) (int, string) {
	if start == "" {
		return 0, ""
	}
	i := sort.Search(len(f.keys), func(i int) bool { return f.keys[i]+"/" > start || strings.HasPrefix(start, f.keys[i]+"/") })
	if i < len(f.keys) && strings.HasPrefix(start, f.keys[i]+"/") {
		return i, strings.TrimPrefix(start, f.keys[i]+"/")
	}
	return i, ""
}
