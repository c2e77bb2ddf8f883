package watchmux

import (
	"context"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// Semantics names the binary's merge semantics in the versions'
// fingerprint: change it with any change of what a view holds for the same
// sources (pkg/merge, pkg/views, the feed), so that a rollout of a binary
// that merges otherwise answers the old versions 410 and never serves a
// difference computed under other rules.
const Semantics = "implicit-views/2"

// Upstream positions: a view's state is a pure function of the sources,
// and each source informer's state is named by the etcd revision of the last
// change it delivered. The vector of those revisions, one per source (the
// namespaces, each served resource, each hub resource), names the state the
// views are merged from, whatever order a replica applied the informers'
// changes in. Callers hold Mux.mu.

// namespacesKey is the namespaces' source key; a resource's is its name, a
// hub resource's resource@cluster.
const namespacesKey = "namespaces"

func sourceKey(resource, cluster string) string {
	if cluster == "" {
		return resource
	}
	return resource + "@" + cluster
}

// ListFunc lists a source's objects as of etcd revision rv
// (resourceVersionMatch=Exact), those of namespace only when it is set
// ("": every object the source's informer holds): kube-apiserver serves
// it within etcd's compaction window and answers 410 Gone outside it. The
// namespaces' lister ignores namespace.
type ListFunc func(ctx context.Context, rv, namespace string) ([]runtime.Object, error)

// positions are the sources' revisions.
type positions struct {
	// revs maps a source key to the revision at which its state, as the
	// mirror holds it, is known complete (stream.go).
	revs map[string]uint64
	// changed maps a source key to the revision of its last change applied,
	// or of its last list past revs (listedLocked): its state is the same
	// at every revision from changed to revs.
	changed map[string]uint64
	// before maps a source key to the revisions, from and to, between
	// which its state was the mirror's before each of its last lists that
	// changed nothing (listedLocked; maxListedGaps of them), until its
	// next change: a client at a revision from before such a list's gap
	// still holds the current state.
	before map[string][][2]uint64
	// equal maps a source key to the revisions past revs whose lists were
	// found to hold the mirror's state (catchUp), until the source's next
	// change after them (passedLocked).
	equal map[string]*equalRevisions
	// lists are the sources' exact listers; a missing one makes versions
	// this replica has no history for unservable (410).
	lists map[string]ListFunc
	// cacheMu guards keys and fp, which readers fill under Mux.mu's read
	// lock, as lineMu the lineages.
	cacheMu sync.Mutex
	// keys caches the sorted keys (nil after a source is added).
	keys []string
	// fp caches the fingerprint (0 after the configuration changes).
	fp uint64
}

func newPositions() *positions {
	return &positions{revs: map[string]uint64{namespacesKey: 0}, changed: map[string]uint64{}, before: map[string][][2]uint64{}, equal: map[string]*equalRevisions{}, lists: map[string]ListFunc{}}
}

// equalRevisions are the revisions at which a source's list was found to
// hold the mirror's state. Each is kept: two clients may come from versions
// naming the quiet source by two revisions, and etcd's state at a revision
// between them need not be the mirror's (an object created and deleted in
// between), so each version is reached by its own revision only. The
// versions this replica issues name the source by the highest (top), so
// that a later catch-up at a lower revision never moves them back.
type equalRevisions struct {
	top uint64
	at  map[uint64]bool
}

// maxEqualRevisions bounds the revisions kept per source: past it the
// lowest is forgotten, and a client at it is compared again (a list).
const maxEqualRevisions = 32

// addEqualLocked records that source key's list at rev holds the mirror's
// state.
func (p *positions) addEqualLocked(key string, rev uint64) {
	e := p.equal[key]
	if e == nil {
		e = &equalRevisions{at: map[uint64]bool{}}
		p.equal[key] = e
	}
	e.at[rev] = true
	e.top = max(e.top, rev)
	if len(e.at) > maxEqualRevisions {
		lowest := e.top
		for r := range e.at {
			lowest = min(lowest, r)
		}
		delete(e.at, lowest)
	}
}

// equalAt reports whether source key's list at rev was found to hold the
// mirror's state.
func (p *positions) equalAt(key string, rev uint64) bool {
	e := p.equal[key]
	return e != nil && rev != 0 && e.at[rev]
}

// equalTop is the highest revision at which source key's list was found to
// hold the mirror's state; 0 when none.
func (p *positions) equalTop(key string) uint64 {
	if e := p.equal[key]; e != nil {
		return e.top
	}
	return 0
}

// addLocked adds a source; a new source changes the vector's layout and the
// fingerprint.
func (p *positions) addLocked(key string) {
	if _, ok := p.revs[key]; !ok {
		p.revs[key] = 0
		p.invalidateLocked()
	}
}

// invalidateLocked drops the cached keys and fingerprint: the
// configuration changed.
func (p *positions) invalidateLocked() {
	p.cacheMu.Lock()
	p.keys, p.fp = nil, 0
	p.cacheMu.Unlock()
}

// sortedKeys returns the source keys in the vector's order.
func (p *positions) sortedKeys() []string {
	p.cacheMu.Lock()
	defer p.cacheMu.Unlock()
	if p.keys == nil {
		for k := range p.revs {
			p.keys = append(p.keys, k)
		}
		sort.Strings(p.keys)
	}
	return p.keys
}

// index is key's component in the vector.
func (p *positions) index(key string) int {
	keys := p.sortedKeys()
	i := sort.SearchStrings(keys, key)
	if i < len(keys) && keys[i] == key {
		return i
	}
	return -1
}

// vector returns the current revisions, as the versions this replica
// issues name them: a source whose list at a later revision was found to
// hold the mirror's state (catchUp's equal revisions) is named by the
// highest such revision until its next change, so that the events of a watch resumed
// from another replica's version never name a source's state, unchanged,
// by a revision older than the one the client started from (issue 38: the
// replicas' quiet parts follow etcd at their own moments). The informer's
// changes up to it are dropped (passedLocked); its next change after it
// forgets it.
func (p *positions) vector() []uint64 {
	keys := p.sortedKeys()
	out := make([]uint64, len(keys))
	for i, k := range keys {
		out[i] = max(p.revs[k], p.equalTop(k))
	}
	return out
}

// applyLocked records that source key changed, and that its state is then
// complete at revision rev. The revision never goes back (a source fed
// without a Tracker may deliver a relist's objects in no order). It returns
// the component and the revision before, for the change's version.
func (p *positions) applyLocked(key string, rev uint64) (k int, prev uint64) {
	k = p.index(key)
	prev = p.revs[key]
	if rev > prev {
		p.revs[key] = rev
	}
	p.changed[key] = p.revs[key]
	delete(p.before, key)
	delete(p.equal, key)
	return k, prev
}

// passedLocked reports whether a change a Tracker delivers for source key
// at revision rev (0: an informer fed without one, whose revisions are its
// objects') lies at or before the revision the mirror was found equal at
// (catchUp): the informer, lagging, is delivering the writes between its
// revision and that one, and since etcd held the mirror's state at both,
// their sum changes nothing the mirror holds (objects created and deleted
// in between; an object the mirror holds keeps its resourceVersion). Such
// a change is dropped, not applied: applied, it would name a state the
// client resumed at the equal revision never held, by a revision older
// than the one it started from, and the versions of that source would go
// back (issue 38, the out-of-order versions of the 30-minute runs).
func (p *positions) passedLocked(key string, rev uint64) bool {
	return rev != 0 && rev <= p.equalTop(key)
}

// progressLocked records that source key's state, unchanged, is complete
// at revision rev.
func (p *positions) progressLocked(key string, rev uint64) {
	if rev > p.revs[key] {
		p.revs[key] = rev
	}
}

// listedLocked records that a list of source key at rev found the
// mirror's state (a relist that changed nothing, a first list of no
// objects): complete at rev, but the informer saw none of the writes
// between its last revision and rev, and etcd's states in between need not
// be the mirror's (an object created and deleted while the watch was gone,
// or before the replica started: another replica saw it). So the source is
// known unchanged from rev on only: a client whose revision lies in the gap
// is not in the current state (sameStateLocked) and gets the difference
// from its own. Those before the gap still hold it (before), and a
// catch-up's equal revisions stay: each was compared.
func (p *positions) listedLocked(key string, rev uint64) {
	if rev > p.revs[key] {
		if p.revs[key] > 0 {
			b := append(p.before[key], [2]uint64{p.changed[key], p.revs[key]})
			p.before[key] = b[max(0, len(b)-maxListedGaps):]
		}
		p.revs[key] = rev
		p.changed[key] = rev
	}
}

// revisionOr is rev, or obj's resourceVersion when rev is 0.
func revisionOr(rev uint64, obj any) uint64 {
	if rev != 0 {
		return rev
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(acc.GetResourceVersion(), 10, 64)
	return n
}

// reachesLocked reports whether this replica's state is at or past
// vector: each source's revision is at or past vector's, or the state at
// vector's revision was found equal to its own (catchUp).
func (p *positions) reachesLocked(vector []uint64) bool {
	keys := p.sortedKeys()
	if len(keys) != len(vector) {
		return false
	}
	for i, k := range keys {
		if vector[i] > p.revs[k] && !p.equalAt(k, vector[i]) {
			return false
		}
	}
	return true
}

// sameStateLocked reports whether vector names the state this replica
// holds: for each source, no change between vector's revision and its own
// (both complete) nor a list's gap (before), or vector's revision found
// equal to it. A client at
// vector holds exactly the current views: nothing to list or send.
func (p *positions) sameStateLocked(vector []uint64) bool {
	keys := p.sortedKeys()
	if len(keys) != len(vector) {
		return false
	}
	for i, k := range keys {
		v := vector[i]
		if p.equalAt(k, v) || p.beforeGapLocked(k, v) {
			continue
		}
		if v < p.changed[k] || v > p.revs[k] {
			return false
		}
	}
	return true
}

// fingerprint hashes the semantics and the configuration the views depend
// on: the policy (global namespace, excluded namespaces, depth cap), the
// sources, each resource's strategy and global namespace.
func (s *state) fingerprint(p *positions) uint64 {
	p.cacheMu.Lock()
	fp := p.fp
	p.cacheMu.Unlock()
	if fp != 0 {
		return fp
	}
	h := fnv.New64a()
	w := func(parts ...string) {
		for _, x := range parts {
			h.Write([]byte(x))
			h.Write([]byte{0})
		}
	}
	w(Semantics, s.policy.GlobalNamespace, strconv.Itoa(s.policy.MaxDepth))
	excluded := make([]string, 0, len(s.policy.Excluded))
	for n, ok := range s.policy.Excluded {
		if ok {
			excluded = append(excluded, n)
		}
	}
	slices.Sort(excluded)
	w("excluded", strings.Join(excluded, ","))
	w("sources")
	w(p.sortedKeys()...)
	resources := slices.Clone(s.resources)
	slices.Sort(resources)
	for _, r := range resources {
		w("resource", r, string(strategyOf(s.options[r])), s.globals[r])
	}
	fp = h.Sum64() | 1 // never 0
	p.cacheMu.Lock()
	p.fp = fp
	p.cacheMu.Unlock()
	return fp
}

func strategyOf(o merge.Options) merge.Strategy {
	if o.Strategy == "" {
		return merge.Replace
	}
	return o.Strategy
}

// changeVersion is what the versions of one change's events share: the
// vector after the change and, when it made more than one event, the
// source that changed and its revision before, for positions inside it.
type changeVersion struct {
	fp     uint64
	vector []uint64
	k      int
	prev   uint64
	// whole: the change made one event (or changed the configuration):
	// its events' versions name the state after it.
	whole bool
	// head is the text every event version of the change starts with
	// (rv.AppendHead of fp and vector), printed once for all of them.
	head []byte
}

func newChangeVersion(fp uint64, vector []uint64, k int, prev uint64, whole bool) *changeVersion {
	return &changeVersion{fp: fp, vector: vector, k: k, prev: prev, whole: whole, head: rv.AppendHead(nil, fp, vector)}
}

// after is the version of the state after the whole change.
func (c *changeVersion) after() *changeVersion {
	if c.whole {
		return c
	}
	out := *c
	out.whole = true
	return &out
}

// text prints the version of an event of the change in namespace, the
// index-th of namespace's events of its resource, with seq the hint.
func (c *changeVersion) text(namespace string, index int, seq uint64) string {
	var mid *rv.Mid
	if !c.whole && c.k >= 0 && namespace != "" {
		mid = &rv.Mid{K: c.k, Prev: c.prev, Index: index, Namespace: namespace}
	}
	// One allocation per event: the tail is printed on the stack, then
	// joined to the head in the string's own bytes.
	var buf [96]byte
	tail := rv.AppendTail(buf[:0], mid, seq)
	var out strings.Builder
	out.Grow(len(c.head) + len(tail))
	out.Write(c.head)
	out.Write(tail)
	return out.String()
}

// currentTextLocked is the version of the current state: the lists' and
// the bookmarks'.
func (m *Mux) currentTextLocked() string {
	return rv.Version{Fingerprint: m.st.fingerprint(m.pos), Vector: m.pos.vector(), Seq: m.v.current()}.String()
}

// maxListedGaps bounds the quiet lists a source's clients from before are
// still known to hold the current state across (before).
const maxListedGaps = 4

// beforeGapLocked reports whether revision v of source key lies before
// one of its last lists that changed nothing, where its state was the
// mirror's (before).
func (p *positions) beforeGapLocked(key string, v uint64) bool {
	for _, b := range p.before[key] {
		if v >= b[0] && v <= b[1] {
			return true
		}
	}
	return false
}
