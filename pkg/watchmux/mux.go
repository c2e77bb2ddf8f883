package watchmux

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// Options tune a Mux. Zero values take the defaults.
type Options struct {
	// HistorySize is how many view events are kept for resuming watches
	// (default 100,000).
	HistorySize int
	// HistoryBytes bounds the estimated bytes of the objects the history's
	// events pin (default 256 MiB): with large objects, HistorySize events
	// could pin gigabytes.
	HistoryBytes int64
	// BufferSize is a namespace watcher's buffer (default 100). An
	// all-namespaces watcher gets max(10 × BufferSize, 2 × namespaces).
	BufferSize int
	// SlowBudget is how long one fan-out waits, in all, for watchers whose
	// buffer is full before closing them (default 250ms).
	SlowBudget time.Duration
	// BookmarkInterval is how often watchers that asked for bookmarks get
	// one (default 30s).
	BookmarkInterval time.Duration
	// Clock is injected for tests (default the real clock).
	Clock clock.WithTicker
	// PastStates admits, in its requester's turn, the exact lists a watch
	// or list makes to build a past state the caches don't hold (a fair
	// queue per requester: each version a client makes up costs
	// kube-apiserver and etcd lists), once per request, at its first
	// list; a version served from the current state, a catch-up, or a
	// past state the caches hold never asks (pastturn.go). An error
	// answers 429, and the client retries; nil admits every one.
	PastStates func(ctx context.Context) error
}

func (o *Options) defaults() {
	if o.HistorySize <= 0 {
		o.HistorySize = 100_000
	}
	if o.BufferSize <= 0 {
		o.BufferSize = 100
	}
	if o.SlowBudget <= 0 {
		o.SlowBudget = 250 * time.Millisecond
	}
	if o.BookmarkInterval <= 0 {
		o.BookmarkInterval = 30 * time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
}

// Mux holds the mirror of the sources, computes view events and fans them
// out. Its code is in three parts: the type and its reads (mux.go,
// reader.go), the feed from the informers (feed.go), and publishing
// (publish.go, fanout.go, watcher.go).
//
// Locks are taken in the order mu -> fanMu -> wmu, never the other way
// round: no path takes mu while holding fanMu or wmu, nor fanMu while
// holding wmu.
//
//   - mu (RWMutex) guards the mirror (st), the versions (v), synced, the
//     history (hist), nextTicket, regs and hub. The feed holds it for
//     writing while it computes a change's events, stamps them and takes a
//     ticket; reads (Read, Watch, LineageGeneration, Serving, HasSynced)
//     hold it for reading. state.lineMu is a leaf under it, for the lineage
//     cache readers fill.
//   - fanMu guards the fan-out: serving, dispatched and the fanTurn
//     condition. A fan-out holds it, without mu, while it delivers one
//     change's events; bookmarks hold it to read dispatched and serving
//     (after reading the current version under mu, released first). Only two paths
//     take it under mu: MarkSynced, and a change that runs out of versions
//     (publish.go), which waits for the fan-outs already numbered and
//     closes every watcher.
//   - wmu guards the watcher indexes (watchers, allNamespaces,
//     byNamespace). Watch takes it under mu's read lock to add a watcher;
//     a fan-out and bookmarks under fanMu; Stop alone, or under fanMu when
//     a fan-out closes a slow watcher.
//
// Goroutines:
//
//   - the informers' handler goroutines call OnNamespace and OnSource (the
//     feed): each computes its change under mu, releases it, then waits for
//     its ticket's turn on fanTurn and fans out. One change at a time holds
//     mu; fan-outs run one at a time in version order, while the next
//     changes are computed and reads go on.
//   - Run, on its caller's goroutine: waits for the informers' initial
//     objects, marks the mux synced, sends bookmarks every
//     BookmarkInterval, and closes every watcher when its context ends.
//   - one goroutine per watcher (watcher.run), started by Watch: it sends
//     the initial events, then what the fan-out put in its buffer, and is
//     the only writer and closer of its result channel; Stop or its context
//     ends it.
//   - readers (pkg/views, pkg/authz, pkg/admission, pkg/registry) call Read
//     and Watch on their own goroutines.
//
// Memory holds the sources, the namespaces, each namespace's resolved
// lineage (at most --max-depth ancestors, dropped for a namespace's subtree
// when it changes), the history and the watchers: never a namespace ×
// inherited item product. View objects are built on demand (see
// pkg/views).
type Mux struct {
	opts    Options
	objects Objects

	// mu guards st, v, synced, hist, nextTicket, regs and hub.
	mu sync.RWMutex
	st *state
	v  versions
	// pos are the sources' revisions: the upstream state the views are at.
	pos *positions
	// past caches states of the sources at other replicas' versions.
	past *onceCache[string, *pastState]
	// scoped caches the lists one-namespace past states are built from.
	scoped *scopedLists
	synced bool
	hist   *history
	// replaced is, by namespace name, the last sequence number of the
	// change that deleted the namespace of that name or replaced it by
	// another (another uid): the history is no namespaced watch's past
	// across it (replaced.go); mu.
	replaced replacedNamespaces

	// frozenMu guards frozen: each resource's latest Frozen state, shared
	// by the lists at its version. A leaf lock, taken under mu's read lock.
	frozenMu sync.Mutex
	frozen   map[string]*Frozen

	// nextTicket numbers the changes with events, in version order; mu.
	nextTicket uint64
	// fanMu guards the fan-out: serving is the ticket whose turn it is, and
	// fanTurn wakes the changes waiting for theirs. Fan-outs run one at a
	// time, in version order, without holding mu.
	fanMu   sync.Mutex
	fanTurn *sync.Cond
	serving uint64
	// dispatched is the version of the last event fanned out, and
	// dispatchedVer its change's; fanMu.
	dispatched    uint64
	dispatchedVer *changeVersion

	// wmu guards watchers and their indexes by namespace ("" watchers are
	// in allNamespaces), and closed: set when Run ends, after which no
	// watcher is added (the server is shutting down).
	wmu           sync.Mutex
	closed        bool
	watchers      map[*watcher]struct{}
	allNamespaces map[*watcher]struct{}
	byNamespace   map[string][]*watcher
	// connections number the client connections of open watchers
	// (connection.go).
	connections    map[string]*connectionGroup
	lastConnection uint64

	// regs are the registrations of the informer handlers Run waits for:
	// the namespaces' and those of the resources New was given; mu.
	regs []cache.ResourceEventHandlerRegistration
	// membershipKey is the source key of the cluster's registration on its
	// fleet's hub (membership.go), "" when none is fed, and member the
	// cluster's name there; mu.
	membershipKey, member string

	// changed gets a value, without blocking, after every applied change
	// once synced: a coalescing signal for Changed.
	changed chan struct{}
	// next is closed, and replaced, at every applied change once synced:
	// NextChange's broadcast; nextMu.
	nextMu sync.Mutex
	next   chan struct{}

	// hub names the cluster the global sources come from when they are read
	// from another cluster (AddSource with Source.Cluster); then the local
	// informers' objects in the global namespace are ignored; mu.
	hub string
}

// New returns a mux for the resources of policy's namespaces, merged with
// the Replace strategy (see SetMergeOptions). objects turns events into view
// objects. More resources can be added while it runs (AddResource).
func New(policy merge.Policy, resources []string, objects Objects, opts Options) *Mux {
	opts.defaults()
	m := &Mux{
		opts:          opts,
		objects:       objects,
		st:            newState(policy, resources),
		v:             newVersions(),
		pos:           newPositions(),
		past:          newPastCache(),
		scoped:        newScopedLists(),
		watchers:      map[*watcher]struct{}{},
		allNamespaces: map[*watcher]struct{}{},
		byNamespace:   map[string][]*watcher{},
		connections:   map[string]*connectionGroup{},
		changed:       make(chan struct{}, 1),
		next:          make(chan struct{}),
	}
	m.fanTurn = sync.NewCond(&m.fanMu)
	for _, r := range resources {
		m.pos.addLocked(r)
	}
	m.hist = newHistory(opts.HistorySize, opts.HistoryBytes, m.v.current())
	return m
}

// HasSynced reports whether every informer's initial objects are in the mirror.
func (m *Mux) HasSynced() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.synced
}

// Run marks the mux synced once every informer handler has seen its initial
// objects, sends bookmarks, and, when ctx is cancelled, closes every watcher;
// a watch after that is answered 429 (the server is shutting down).
func (m *Mux) Run(ctx context.Context) {
	m.mu.RLock()
	syncs := make([]cache.InformerSynced, 0, len(m.regs))
	for _, r := range m.regs {
		syncs = append(syncs, r.HasSynced)
	}
	m.mu.RUnlock()
	if cache.WaitForCacheSync(ctx.Done(), syncs...) {
		m.MarkSynced()
		m.mu.RLock()
		resources := slices.Clone(m.st.resources)
		m.mu.RUnlock()
		klog.InfoS("Sources synced: serving views", "resources", resources)
	}
	t := m.opts.Clock.NewTicker(m.opts.BookmarkInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// Refused from now on, then ended: none is left open.
			m.wmu.Lock()
			m.closed = true
			m.wmu.Unlock()
			m.closeAll()
			return
		case <-t.C():
			m.bookmark()
		}
	}
}

// Serving reports whether resource's views are complete: the mux has synced
// and resource is served and no longer pending. A follower of the views
// (the materializer) acts on them only then: before, a view may lack items
// whose sources have not been read, and acting on it would delete what
// still exists. Changes of a serving resource are followed with Watch on
// all namespaces: each event names the namespace whose view changed.
func (m *Mux) Serving(resource string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, served := m.st.sources[resource]
	return m.synced && served && !m.st.pending.Has(resource)
}

// Changed signals, coalesced, that the mirror changed (or synced): a
// reader that wants to follow it re-reads what it needs after each signal.
// It has one reader: the admission webhook's ConditionSync.
func (m *Mux) Changed() <-chan struct{} { return m.changed }

// NextChange returns a channel closed at the mirror's next change (or
// sync): a reader that waits for the views to move, such as a list of a
// version ahead of them, takes it before it reads, then waits on it.
func (m *Mux) NextChange() <-chan struct{} {
	m.nextMu.Lock()
	defer m.nextMu.Unlock()
	return m.next
}

// LineageGeneration returns a key that changes whenever a view of
// namespace, of one of its ancestors or of the global namespace changes, or
// its ancestors change: a decision computed from those views (pkg/authz)
// stays valid while the key is the same.
func (m *Mux) LineageGeneration(namespace string) (string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.synced {
		return "", errNotSynced
	}
	l := m.st.lineage(namespace)
	var b strings.Builder
	// The instance id keeps keys of different instances apart.
	fmt.Fprintf(&b, "%d/%s=%d", m.v.instance, namespace, m.st.generations[namespace])
	for _, g := range m.st.globalNamespaces() {
		fmt.Fprintf(&b, "/%s=%d", g, m.st.generations[g])
	}
	for _, a := range l.Ancestors {
		fmt.Fprintf(&b, "/%s=%d", a.Name, m.st.generations[a.Name])
	}
	return b.String(), nil
}

// EmptyObject returns an empty source object of resource: the Go type a
// previewed object must have.
func (m *Mux) EmptyObject(resource string) runtime.Object {
	return m.objects.Empty(resource)
}

var errNotSynced = fmt.Errorf("the sources have not been read yet")

// IsNotSynced reports whether err says the mux has not synced yet.
func IsNotSynced(err error) bool { return err == errNotSynced }
