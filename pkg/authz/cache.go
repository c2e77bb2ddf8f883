package authz

import (
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

const (
	// DefaultCacheSize is the number of decisions kept.
	DefaultCacheSize = 10_000
	// DefaultCacheBytes bounds the estimated memory of the decisions kept:
	// keys, reasons and the cache's own bookkeeping. Typical keys (a user, a
	// few groups, the request) take a few hundred bytes, so the entry bound
	// is the one that binds in normal use; this one binds when requests
	// carry long names or many groups.
	DefaultCacheBytes = 32 << 20
	// MaxCachedKeyBytes is the longest request key whose decision is
	// cached. Longer requests (a SubjectAccessReview for a name of a
	// megabyte, thousands of groups) are decided every time: caching them
	// would let anyone who can ask fill the cache with a few requests, and
	// nothing legitimate asks them twice.
	MaxCachedKeyBytes = 16 << 10
	// entryOverhead estimates what an entry costs beyond its key and reason
	// bytes: the list element, the map slot, the string and Decision
	// headers, rounded up.
	entryOverhead = 256
	// roleOverhead estimates what each real Role an entry resolved costs
	// beyond its strings: the string headers of a roleVersion.
	roleOverhead = 80
	// shadowOverhead estimates what each shadow decision an entry holds
	// costs beyond its strings: the string headers and the Decision.
	shadowOverhead = 128
)

// cached is a decision as the cache keeps it, with the real Roles it
// resolved: it stands only while they are the mirror's (Authorizer.current).
// shadows are the answers the candidates the namespace does not see would
// give (shadow.go); their Roles are among roles.
type cached struct {
	d       Decision
	roles   []roleVersion
	shadows []shadowDecision
}

// decisionCache is an LRU cache of decisions bounded both by entries and by
// an estimate of the bytes they hold (entryBytes). Adding an entry evicts
// the least recently used ones until both bounds hold again. It is safe for
// concurrent use: one mutex guards the LRU, whose Get moves an entry to the
// front and so writes too.
type decisionCache struct {
	maxBytes int64

	mu    sync.Mutex
	lru   *simplelru.LRU[string, cached]
	bytes int64 // estimated bytes held; mu
}

func newDecisionCache(entries int, maxBytes int64) (*decisionCache, error) {
	c := &decisionCache{maxBytes: maxBytes}
	lru, err := simplelru.NewLRU(entries, func(key string, d cached) {
		// Called with mu held, from Add and RemoveOldest.
		c.bytes -= entryBytes(key, d)
	})
	if err != nil {
		return nil, err
	}
	c.lru = lru
	return c, nil
}

// entryBytes estimates the memory an entry holds.
func entryBytes(key string, d cached) int64 {
	n := int64(len(key)+len(d.d.Reason)) + entryOverhead
	for _, r := range d.roles {
		n += int64(len(r.namespace)+len(r.name)+len(r.cluster)+len(r.uid)+len(r.resourceVersion)) + roleOverhead
	}
	for _, s := range d.shadows {
		c := s.target.candidate
		n += int64(len(c.Namespace)+len(c.Name)+len(c.UID)+len(c.Cluster)+len(s.target.stable)+len(s.d.Reason)) + shadowOverhead
	}
	return n
}

// get returns the decision cached under key.
func (c *decisionCache) get(key string) (cached, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Get(key)
}

// add caches d under key unless the entry alone would be larger than
// MaxCachedKeyBytes or the byte bound, and evicts the least recently used
// entries until both bounds hold.
func (c *decisionCache) add(key string, d cached) {
	if len(key) > MaxCachedKeyBytes {
		return
	}
	n := entryBytes(key, d)
	if n > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.lru.Peek(key); ok {
		// Replaced in place: no eviction callback for the old value.
		c.bytes -= entryBytes(key, old)
	}
	c.bytes += n
	c.lru.Add(key, d)
	for c.bytes > c.maxBytes {
		if _, _, ok := c.lru.RemoveOldest(); !ok {
			break
		}
	}
}

// usage returns the entries held and their estimated bytes.
func (c *decisionCache) usage() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}
