package accessreview

import (
	"container/list"
	"encoding/json"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/utils/clock"
)

// answer is a decision of the host cluster.
type answer struct {
	allowed bool
	reason  string
}

// cacheEntry is one cached answer, in the cache's insertion order.
type cacheEntry struct {
	key     string
	answer  answer
	expires time.Time
}

// decisions caches answers (the Reviewer puts allows only) for ttl, at most max
// of them. Every entry lives as long, so insertion order is expiry order:
// order holds the entries oldest first, and a full cache drops its oldest.
type decisions struct {
	clock clock.PassiveClock
	ttl   time.Duration
	max   int

	mu    sync.Mutex
	byKey map[string]*list.Element
	order *list.List
}

func newDecisions(c clock.PassiveClock, ttl time.Duration, max int) *decisions {
	return &decisions{clock: c, ttl: ttl, max: max, byKey: map[string]*list.Element{}, order: list.New()}
}

// get returns the answer cached under key, if it has not expired.
func (d *decisions) get(key string) (answer, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.byKey[key]
	if !ok {
		return answer{}, false
	}
	ce := e.Value.(*cacheEntry)
	if !d.clock.Now().Before(ce.expires) {
		d.removeLocked(e)
		return answer{}, false
	}
	return ce.answer, true
}

// put caches a under key for ttl, dropping expired entries and, when still
// full, the oldest.
func (d *decisions) put(key string, a answer) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	if e, ok := d.byKey[key]; ok {
		d.removeLocked(e)
	}
	for e := d.order.Front(); e != nil && (!now.Before(e.Value.(*cacheEntry).expires) || d.order.Len() >= d.max); e = d.order.Front() {
		d.removeLocked(e)
	}
	d.byKey[key] = d.order.PushBack(&cacheEntry{key: key, answer: a, expires: now.Add(d.ttl)})
}

func (d *decisions) removeLocked(e *list.Element) {
	delete(d.byKey, e.Value.(*cacheEntry).key)
	d.order.Remove(e)
}

// len is the number of entries held, expired ones included.
func (d *decisions) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.order.Len()
}

// question is everything an answer depends on: the whole user (name, uid,
// groups in their order, extra) and every attribute. Two questions share a
// cache entry only when all of it is equal.
type question struct {
	User   string                             `json:"u"`
	UID    string                             `json:"i"`
	Groups []string                           `json:"g"`
	Extra  map[string][]string                `json:"e"`
	Attrs  authorizationv1.ResourceAttributes `json:"a"`
}

// cacheKey encodes the question; encoding/json writes map keys sorted, so
// equal questions have equal keys.
func cacheKey(user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (string, error) {
	extra := make(map[string][]string, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = v
	}
	b, err := json.Marshal(question{User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra, Attrs: attrs})
	return string(b), err
}
