package watchmux

import (
	"container/list"
	"sync"
)

// onceCache keeps values built once per key and shared by every caller
// asking for the same key while it is kept (the lists of the sources at a
// revision that many resumes read), the least recently used dropped first.
// It is bounded by its number of entries and by the total weight of its
// values (objects held). A build that fails is not kept.
type onceCache[K comparable, V any] struct {
	maxEntries int
	maxWeight  int
	weight     func(V) int

	mu      sync.Mutex
	order   *list.List // of *onceEntry[K, V], most recent at the back
	entries map[K]*list.Element
	total   int
}

type onceEntry[K comparable, V any] struct {
	key    K
	once   sync.Once
	v      V
	err    error
	weight int
	// counted says weight is in total (the build finished and the entry is
	// still kept).
	counted bool
}

func newOnceCache[K comparable, V any](maxEntries, maxWeight int, weight func(V) int) *onceCache[K, V] {
	return &onceCache[K, V]{maxEntries: maxEntries, maxWeight: maxWeight, weight: weight, order: list.New(), entries: map[K]*list.Element{}}
}

// get returns key's value, building it with build unless it is kept or
// being built (then the caller waits for that build).
func (c *onceCache[K, V]) get(key K, build func() (V, error)) (V, error) {
	c.mu.Lock()
	el, ok := c.entries[key]
	if ok {
		c.order.MoveToBack(el)
	} else {
		el = c.order.PushBack(&onceEntry[K, V]{key: key})
		c.entries[key] = el
		for c.order.Len() > c.maxEntries {
			c.removeLocked(c.order.Front())
		}
	}
	e := el.Value.(*onceEntry[K, V])
	c.mu.Unlock()
	e.once.Do(func() {
		e.v, e.err = build()
		c.mu.Lock()
		defer c.mu.Unlock()
		if cur, ok := c.entries[key]; !ok || cur != el {
			return // dropped while it was built
		}
		if e.err != nil {
			c.removeLocked(el)
			return
		}
		e.weight, e.counted = c.weight(e.v), true
		c.total += e.weight
		// Drop the oldest until the weight fits, never the entry just built.
		for c.total > c.maxWeight && c.order.Front() != el {
			c.removeLocked(c.order.Front())
		}
	})
	return e.v, e.err
}

func (c *onceCache[K, V]) removeLocked(el *list.Element) {
	e := el.Value.(*onceEntry[K, V])
	if e.counted {
		c.total -= e.weight
		e.counted = false
	}
	c.order.Remove(el)
	delete(c.entries, e.key)
}

// size is the number of entries and their total weight.
func (c *onceCache[K, V]) size() (entries, weight int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len(), c.total
}
