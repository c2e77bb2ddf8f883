package admission

import (
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
)

// recentKey names a source: its view resource, namespace and name.
type recentKey struct{ resource, namespace, name string }

// recent remembers, for assumeFor, what the source guards admitted that the
// mirror may not show yet: the locks set (a source locked a moment ago) and
// the candidates written (a stable name staged a moment ago). A candidate
// and a lock admitted back to back must not each pass because the mirror
// shows neither. Like the parent guard's assumptions, an entry can name a
// write another webhook refused: it only ever makes a guard stricter, for
// at most ttl. A lock is forgotten sooner once the mirror shows its write
// settled (settleLocks): from then on the mirror tells the source's state,
// an unlock after it included.
type recent struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	ttl   time.Duration
	// shown reads the source k as the mirror holds it: its uid and
	// resourceVersion (nil: locks are kept for ttl).
	shown func(k recentKey) (uid types.UID, resourceVersion string, found bool)
	// locks are the sources admitted locked; candidates the stable names
	// admitted candidates stage, with the candidate's name.
	locks      map[recentKey]recentObject
	candidates map[recentKey]recentCandidate
	// adopted are the materialized copies written into objects of their
	// namespace's own (the copy label removed) a moment ago, as written.
	adopted map[recentKey]recentObject
	// forgotten are the candidates forgotten once the mirror showed them
	// land and go, by the end of their entry: the shared record, which
	// other replicas keep writing until then, does not bring them back.
	forgotten map[recentKey]time.Time
	// settled are the locks forgotten once the mirror showed their write
	// settled, kept to the end of their entry for the same reason.
	settled map[recentKey]recentObject
}

type recentCandidate struct {
	name   string
	locked bool
	// landed: the mirror has shown the candidate; once it no longer does,
	// it was deleted and is forgotten.
	landed bool
	until  time.Time
}

func newRecent(clk clock.PassiveClock) *recent {
	return &recent{clock: clk, ttl: assumeFor, locks: map[recentKey]recentObject{}, candidates: map[recentKey]recentCandidate{}, adopted: map[recentKey]recentObject{},
		forgotten: map[recentKey]time.Time{}, settled: map[recentKey]recentObject{}}
}

// lock records that the source k was admitted locked, as obj, over old
// (nil for a creation).
func (r *recent) lock(k recentKey, obj, old *unstructured.Unstructured) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.locks[k]
	l := recentObject{obj: obj, uid: obj.GetUID(), created: old == nil, until: laterThan(cur.until, ok, r.clock.Now().Add(r.ttl))}
	if old != nil {
		l.over = old.GetResourceVersion()
	}
	r.locks[k] = l
	delete(r.settled, k)
}

// settleLocks forgets the locks whose write the mirror shows settled: the
// mirror holds the object the lock was admitted for (its uid) at a later
// version than the one it was admitted over, or at all for a creation (a
// lock whose uid or version is not known is kept).
// kube-apiserver stores an admitted write only over the version it was
// admitted over, so that write has landed or lost by then, and the mirror
// tells the source's state. An unlock admitted alone forgets nothing:
// another webhook may refuse it.
func (r *recent) settleLocks() {
	if r.shown == nil {
		return
	}
	r.mu.Lock()
	now := r.clock.Now()
	candidates := map[recentKey]recentObject{}
	for k, l := range r.locks {
		if l.uid != "" && !now.After(l.until) {
			candidates[k] = l
		}
	}
	for k, s := range r.settled {
		if now.After(s.until) {
			delete(r.settled, k)
		}
	}
	r.mu.Unlock()
	var done []recentKey
	for k, l := range candidates {
		if uid, rv, ok := r.shown(k); ok && uid == l.uid && (l.created || laterVersion(rv, l.over)) {
			done = append(done, k)
		}
	}
	if len(done) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range done {
		if l, ok := r.locks[k]; ok && l.sameWrite(candidates[k]) {
			delete(r.locks, k)
			r.settled[k] = l
		}
	}
}

// sourceShown reads the source k as the mirror holds it: its uid and
// resourceVersion.
func (g *Guards) sourceShown(k recentKey) (types.UID, string, bool) {
	if g.mirror.Candidates == nil {
		return "", "", false
	}
	obj, found, err := g.mirror.Candidates.SourceObject(k.resource, k.namespace, k.name)
	if err != nil || !found {
		return "", "", false
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", "", false
	}
	return m.GetUID(), m.GetResourceVersion(), true
}

// laterVersion reports whether the resourceVersion rv is later than over,
// both etcd revisions of one object (false when either is not a number).
func laterVersion(rv, over string) bool {
	a, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return false
	}
	b, err := strconv.ParseUint(over, 10, 64)
	return err == nil && a > b
}

// locked reports whether the source k was admitted locked lately.
func (r *recent) locked(k recentKey) bool {
	r.settleLocks()
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.locks[k]
	if ok && r.clock.Now().After(l.until) {
		delete(r.locks, k)
		return false
	}
	return ok
}

// candidate records that a candidate called name staging the stable
// source k was admitted, locked itself or not.
func (r *recent) candidate(k recentKey, name string, locked bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.candidates[k]
	r.candidates[k] = recentCandidate{name: name, locked: locked, until: laterThan(cur.until, ok, r.clock.Now().Add(r.ttl))}
}

// observe reconciles what is remembered of the candidate for the stable
// source k with the mirror, which holds it or not (inMirror): one the
// mirror has shown is marked landed, and one that landed and is gone from
// the mirror is forgotten (deleted). It returns the candidate still
// remembered, if any.
func (r *recent) observe(k recentKey, inMirror func(name string) bool) (recentCandidate, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.candidates[k]
	if !ok {
		return recentCandidate{}, false
	}
	switch {
	case r.clock.Now().After(c.until):
		delete(r.candidates, k)
		return recentCandidate{}, false
	case inMirror(c.name):
		c.landed = true
		r.candidates[k] = c
	case c.landed:
		delete(r.candidates, k)
		r.forgotten[k] = c.until
		return recentCandidate{}, false
	}
	return c, true
}

// recentObject is an object as a write admitted a moment ago made it.
type recentObject struct {
	obj   *unstructured.Unstructured
	until time.Time
	// For a lock (settleLocks): uid is the locked object's; created is set
	// for a creation, else over is the resourceVersion of the object it was
	// admitted over.
	uid     types.UID
	created bool
	over    string
}

// sameWrite reports whether o and other were admitted for one write: the
// same object over the same version.
func (o recentObject) sameWrite(other recentObject) bool {
	return o.uid == other.uid && o.created == other.created && o.over == other.over
}

// adopt records that the copy k became obj, an object of its namespace's
// own.
func (r *recent) adopt(k recentKey, obj *unstructured.Unstructured) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.adopted[k]
	r.adopted[k] = recentObject{obj: obj, until: laterThan(cur.until, ok, r.clock.Now().Add(r.ttl))}
}

// adopters returns the namespaces that hold an object of resource/name
// admitted a moment ago: a copy made their own, an object created under a
// locked name, or a source admitted locked.
func (r *recent) adopters(resource, name string) []string {
	r.settleLocks()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	now := r.clock.Now()
	for _, m := range []map[recentKey]recentObject{r.adopted, r.locks} {
		for k, a := range m {
			if now.After(a.until) {
				delete(m, k)
				continue
			}
			if k.resource == resource && k.name == name && !slices.Contains(out, k.namespace) {
				out = append(out, k.namespace)
			}
		}
	}
	return out
}

// pendingWays are the writes admitted a moment ago as a before-and-after
// comparison applies them: all of them, and, when there are objects created
// or made their namespace's own among them, the locks alone as well
// (whatif.Pending.WithoutOwned).
func (r *recent) pendingWays() []whatif.Pending {
	p := r.pending()
	if len(p.Owned) == 0 {
		return []whatif.Pending{p}
	}
	return []whatif.Pending{p, p.WithoutOwned()}
}

// pending returns the locks and adoptions admitted a moment ago.
func (r *recent) pending() whatif.Pending {
	r.settleLocks()
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	var p whatif.Pending
	for k, l := range r.locks {
		if !now.After(l.until) {
			p.AddLocked(whatif.SourceRef{Resource: k.resource, Namespace: k.namespace, Name: k.name}, l.obj)
		}
	}
	for k, a := range r.adopted {
		if !now.After(a.until) {
			p.AddOwned(whatif.SourceRef{Resource: k.resource, Namespace: k.namespace, Name: k.name}, a.obj)
		}
	}
	return p
}
