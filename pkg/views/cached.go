package views

import (
	"bytes"
	"io"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// cachedObject is a view item of one watch event, shared by every watcher
// that receives the event: k8s.io/apiserver's watch encoder asks it for its
// encoding (runtime.CacheableObject), so the item is serialized once per
// encoding (JSON, protobuf, table, ...) however many watchers send it.
type cachedObject struct {
	obj runtime.Object

	mu      sync.Mutex
	encoded map[runtime.Identifier]encoding
}

type encoding struct {
	raw []byte
	err error
}

var _ runtime.CacheableObject = &cachedObject{}

// CacheEncode implements runtime.CacheableObject.
func (c *cachedObject) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	c.mu.Lock()
	e, ok := c.encoded[id]
	if !ok {
		var buf bytes.Buffer
		// encode owns what it is given: a copy, never the shared item.
		e.err = encode(c.obj.DeepCopyObject(), &buf)
		e.raw = buf.Bytes()
		if c.encoded == nil {
			c.encoded = map[runtime.Identifier]encoding{}
		}
		c.encoded[id] = e
	}
	c.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	_, err := w.Write(e.raw)
	return err
}

// GetObject implements runtime.CacheableObject: a copy, the caller's to keep.
func (c *cachedObject) GetObject() runtime.Object { return c.obj.DeepCopyObject() }

// GetObjectKind implements runtime.Object on a copy: the shared item is never
// changed.
func (c *cachedObject) GetObjectKind() schema.ObjectKind {
	return c.obj.DeepCopyObject().GetObjectKind()
}

// DeepCopyObject implements runtime.Object.
func (c *cachedObject) DeepCopyObject() runtime.Object { return c.obj.DeepCopyObject() }

// unwrap returns the view item inside a cachedObject, for reading only.
func unwrap(obj runtime.Object) runtime.Object {
	switch c := obj.(type) {
	case *cachedObject:
		return c.obj
	case *splicedObject:
		if o, err := c.object(); err == nil {
			return o
		}
	}
	return obj
}

// itemKey identifies the view item of one event: the version, the viewing
// namespace, and what the item is made of: the source object, its scope and
// its conflicts. A MODIFIED event has two items, before and after, which may
// share a source and differ in conflicts only.
type itemKey struct {
	rv        string
	namespace string
	source    any
	scope     merge.Scope
	conflict  string
	// merged is the merged object of an item with overlays (nil without).
	merged any
	// name, uid and candidate tell a candidate's object, seen as its
	// stable name's item (merge.Item.FromCandidate), from itself.
	name      string
	uid       types.UID
	candidate string
}

// itemCache holds the shared view items of recent events. It is bounded:
// watchers that fall behind it build their own copy, so its size trades
// memory for encoding work, never correctness.
type itemCache = lru.Cache[itemKey, *cachedObject]

// DefaultItemCacheSize is the number of watch event items kept for sharing.
const DefaultItemCacheSize = 4096

// templateCache holds the templates of recent batches (see splicedObject).
type templateCache = lru.Cache[templateKey, *itemTemplate]

// templateCacheSize is the number of templates kept: one per global edit
// in flight, and per side (before, after) of a MODIFIED.
const templateCacheSize = 64

func newItemCache(size int) *itemCache {
	c, err := lru.New[itemKey, *cachedObject](size)
	if err != nil {
		// Only for a size <= 0, which NewObjects never passes.
		panic(err)
	}
	return c
}

// sharedItem returns the cached view item of r in namespace at rv, building it once.
func (o *Objects) sharedItem(resource, namespace string, r merge.Result, rv string) (runtime.Object, error) {
	key := itemKey{rv: rv, namespace: namespace, source: r.Item.Object, scope: r.Scope, conflict: r.Conflict(), merged: r.Object, name: r.Item.Name, uid: r.Item.UID, candidate: r.Candidates()}
	if c, ok := o.cache.Get(key); ok {
		return c, nil
	}
	obj, err := item(namespace, r, rv, o.stale, o.kindOf(resource))
	if err != nil {
		return nil, err
	}
	c := &cachedObject{obj: obj}
	if prev, ok, _ := o.cache.PeekOrAdd(key, c); ok {
		return prev, nil
	}
	return c, nil
}
