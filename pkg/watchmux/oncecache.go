package watchmux

import (
	"container/list"
	"context"
	"sync"
)

// onceCache keeps values built once per key and shared by every caller
// asking for the same key while it is kept (the past states and the lists
// of the sources at a revision that many resumes read), the least recently
// used dropped first. It is bounded by its number of entries and by the
// total weight of its values (objects held). A build that fails is not
// kept.
//
// A build runs on a goroutine of its own, not on its first caller's: each
// caller waits for it only as long as its own context allows, and one that
// gives up leaves the build to the callers after it. The build bounds
// itself (its lists take a context with a timeout).
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
	key K
	// done is closed when the build has ended; v and err are set then.
	done   chan struct{}
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

// get returns key's value, starting build unless it is kept or being built,
// and waits for the build until ctx ends: then it returns ctx's error and
// the build goes on.
func (c *onceCache[K, V]) get(ctx context.Context, key K, build func() (V, error)) (V, error) {
	c.mu.Lock()
	el, ok := c.entries[key]
	if ok {
		c.order.MoveToBack(el)
	} else {
		el = c.order.PushBack(&onceEntry[K, V]{key: key, done: make(chan struct{})})
		c.entries[key] = el
		for c.order.Len() > c.maxEntries {
			c.removeLocked(c.order.Front())
		}
	}
	e := el.Value.(*onceEntry[K, V])
	c.mu.Unlock()
	if !ok {
		go c.build(el, e, build)
	}
	select {
	case <-e.done:
		return e.v, e.err
	case <-ctx.Done():
		var zero V
		return zero, context.Cause(ctx)
	}
}

// build runs an entry's build and keeps its value, or drops the entry.
func (c *onceCache[K, V]) build(el *list.Element, e *onceEntry[K, V], build func() (V, error)) {
	v, err := build()
	c.mu.Lock()
	defer c.mu.Unlock()
	e.v, e.err = v, err
	close(e.done)
	if cur, ok := c.entries[e.key]; !ok || cur != el {
		return // dropped while it was built
	}
	if err != nil {
		c.removeLocked(el)
		return
	}
	e.weight, e.counted = c.weight(v), true
	c.total += e.weight
	// Drop the oldest until the weight fits, never the entry just built.
	for c.total > c.maxWeight && c.order.Front() != el {
		c.removeLocked(c.order.Front())
	}
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
