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
	// settled are the lock writes forgotten once the mirror showed them
	// settled, kept to the end of their entry for the same reason.
	settled map[recentKey][]settledWrite
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
		forgotten: map[recentKey]time.Time{}, settled: map[recentKey][]settledWrite{}}
}

// lock records that the source k was admitted locked, as obj, over old
// (nil for a creation). The entry keeps every locking write of k admitted
// while it lasts: each may still land until the mirror shows it settled.
func (r *recent) lock(k recentKey, obj, old *unstructured.Unstructured) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := LockWrite{UID: obj.GetUID(), Created: old == nil}
	if old != nil {
		w.Over = old.GetResourceVersion()
	}
	cur, ok := r.locks[k]
	l := recentObject{obj: obj, until: laterThan(cur.until, ok, r.clock.Now().Add(r.ttl))}
	if ok && !r.clock.Now().After(cur.until) {
		l.writes = cur.writes
	}
	l.writes = unionWrites(l.writes, []LockWrite{w})
	r.locks[k] = l
	r.settled[k] = slices.DeleteFunc(r.settled[k], func(s settledWrite) bool { return s.write == w })
}

// settledWrite is a lock's write the mirror showed settled, until the end
// of its entry.
type settledWrite struct {
	write LockWrite
	until time.Time
}

// settled reports whether the mirror, which shows the source at uid and
// rv, shows w settled: the object w was admitted for, at a later version
// than the one it was admitted over, or at all for a creation (a write
// whose uid is not known never settles).
func (w LockWrite) settled(uid types.UID, rv string) bool {
	return w.UID != "" && uid == w.UID && (w.Created || laterVersion(rv, w.Over))
}

// settleLocks forgets the lock writes the mirror shows settled (the mirror
// holds the object a write was admitted for, its uid, at a later version
// than the one it was admitted over, or at all for a creation; a write
// whose uid or version is not known is kept), and a lock once all of its
// writes are: until then another of them may still land.
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
	unsettled := map[recentKey][]LockWrite{}
	for k, l := range r.locks {
		if !now.After(l.until) && slices.ContainsFunc(l.writes, func(w LockWrite) bool { return w.UID != "" }) {
			unsettled[k] = slices.Clone(l.writes)
		}
	}
	for k, ss := range r.settled {
		if ss = slices.DeleteFunc(ss, func(s settledWrite) bool { return now.After(s.until) }); len(ss) == 0 {
			delete(r.settled, k)
		} else {
			r.settled[k] = ss
		}
	}
	r.mu.Unlock()
	done := map[recentKey][]LockWrite{}
	for k, writes := range unsettled {
		uid, rv, ok := r.shown(k)
		if !ok {
			continue
		}
		for _, w := range writes {
			if w.settled(uid, rv) {
				done[k] = append(done[k], w)
			}
		}
	}
	if len(done) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, writes := range done {
		l, ok := r.locks[k]
		if !ok {
			continue
		}
		l.writes = slices.DeleteFunc(slices.Clone(l.writes), func(w LockWrite) bool { return slices.Contains(writes, w) })
		for _, w := range writes {
			r.settled[k] = append(r.settled[k], settledWrite{write: w, until: l.until})
		}
		if len(l.writes) == 0 {
			delete(r.locks, k)
		} else {
			r.locks[k] = l
		}
	}
}

// isSettled reports whether this replica's mirror showed the write w of k
// settled.
func (r *recent) isSettled(k recentKey, w LockWrite) bool {
	return slices.ContainsFunc(r.settled[k], func(s settledWrite) bool { return s.write == w })
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
	// writes are, for a lock, the writes it was admitted for that the
	// mirror has not shown settled (settleLocks), obj the last one's.
	writes []LockWrite
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
