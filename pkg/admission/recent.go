package admission

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
// at most ttl.
type recent struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	ttl   time.Duration
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
		forgotten: map[recentKey]time.Time{}}
}

// lock records that the source k was admitted locked, as obj.
func (r *recent) lock(k recentKey, obj *unstructured.Unstructured) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.locks[k]
	r.locks[k] = recentObject{obj: obj, until: laterThan(cur.until, ok, r.clock.Now().Add(r.ttl))}
}

// locked reports whether the source k was admitted locked lately.
func (r *recent) locked(k recentKey) bool {
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
