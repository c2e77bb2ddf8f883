package views

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"sort"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// One global edit gives the same view item to thousands of tenants, but for
// three fields: metadata.namespace, metadata.uid and
// metadata.resourceVersion. Encoding it once per tenant is most of what a
// fan-out costs. Instead, a template of the item is encoded once per
// encoding (the watch encoder's identifier: JSON, protobuf, table, ...) with
// a placeholder in each of those fields, cut at the placeholders, and each
// tenant's bytes are the cuts with its own values spliced in.
//
// Only JSON is spliced. Protobuf and CBOR prefix strings and messages with
// their lengths, and YAML quotes a value by what it looks like ("123",
// "true"), so their bytes depend on the values. In JSON a string's bytes
// are its characters, quoted, when it needs no escaping, which namespace
// names, uids and versions never do (spliceable checks each value). Each
// encoding is tested once per template: it must be JSON, and the item
// encoded with a second set of placeholders, of other lengths, must be
// exactly the splice of the first encoding with the second set's values;
// and the item of the member that asked first, encoded whole before either
// (those bytes are its own), must be the splice of the first encoding with
// its values. The encoder may keep state between calls: k8s.io/apiserver's
// watch encoder for tables writes column definitions on its first call
// only, then changes its identifier. Encoded first, the member's own item
// gets what the encoder meant for it, and a template encoded after the
// change doesn't splice under the old identifier: that identifier's items
// are encoded whole, each watcher's first event with its headers. An
// encoding that fails, or can't be cut, encodes each tenant's item whole,
// as before. FuzzSplice checks the spliced bytes against the plain
// encoder's for every view kind.

// placeholders are the values of the three fields in a template.
type placeholders [3]string

const (
	fieldNamespace = iota
	fieldUID
	fieldResourceVersion
)

// cutA are the placeholders templates are cut at; checkB, of other lengths,
// test that an encoding splices. A random part keeps them from being met
// in a source object by chance.
var cutA, checkB = newPlaceholders()

func newPlaceholders() (placeholders, placeholders) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("views: reading random bytes: " + err.Error())
	}
	r := hex.EncodeToString(b[:])
	digits := strconv.FormatUint(binary.BigEndian.Uint64(b[:])|1<<62, 10) // 19 digits
	return placeholders{"splice-ns-" + r, "splice-uid-" + r, digits},
		placeholders{"splice-b-namespace-" + r + "-b", "splice-b-u-" + r + "-bb", digits[:12]}
}

// spliceable reports whether a value can be spliced into JSON as it is: it
// needs no escaping. Namespace names, uids and versions always can.
func spliceable(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// templateKey identifies a template: what a view item is made of, apart
// from the namespace it is seen in and its version (itemKey without them).
type templateKey struct {
	resource string
	source   any
	scope    merge.Scope
	conflict string
	merged   any
	// name, uid and candidate tell a candidate's object, seen as its
	// stable name's item (merge.Item.FromCandidate), from itself.
	name      string
	uid       types.UID
	candidate string
}

// itemTemplate is a view item shared by many namespaces, with its encodings
// cut for splicing.
type itemTemplate struct {
	// a and b are the item with placeholders cutA and checkB.
	a, b      runtime.Object
	sourceUID types.UID

	mu   sync.Mutex
	cuts map[runtime.Identifier]*cut
}

// cut is one encoding of a template, cut at its placeholders: parts[i] is
// followed by the value of fields[i]. ok is false when the encoding can't
// be spliced.
type cut struct {
	ok     bool
	parts  [][]byte
	fields []int
	size   int
}

// splicedObject is a batch member's view item: it encodes itself from its
// template's cut encodings when they splice, and is built whole only when
// something needs the object (a selector, an encoding that doesn't splice).
type splicedObject struct {
	t         *itemTemplate
	namespace string
	rv        string
	// o, resource and r build the whole item, once (object).
	o        *Objects
	resource string
	r        merge.Result
	once     sync.Once
	obj      runtime.Object
	err      error
}

var _ runtime.CacheableObject = &splicedObject{}

// BatchItem implements watchmux.BatchObjects.
func (o *Objects) BatchItem(resource, namespace string, r merge.Result, rv string) (runtime.Object, error) {
	t, err := o.template(resource, r)
	if err != nil {
		return nil, err
	}
	return &splicedObject{t: t, namespace: namespace, rv: rv, o: o, resource: resource, r: r}, nil
}

var _ watchmux.BatchObjects = &Objects{}

// template returns the template of r's item, building it once.
func (o *Objects) template(resource string, r merge.Result) (*itemTemplate, error) {
	key := templateKey{resource: resource, source: r.Item.Object, scope: r.Scope, conflict: r.Conflict(), merged: r.Object, name: r.Item.Name, uid: r.Item.UID, candidate: r.Candidates()}
	if t, ok := o.templates.Get(key); ok {
		return t, nil
	}
	kind := o.kindOf(resource)
	a, err := templateItem(r, cutA, o.stale, kind)
	if err != nil {
		return nil, err
	}
	b, err := templateItem(r, checkB, o.stale, kind)
	if err != nil {
		return nil, err
	}
	t := &itemTemplate{a: a, b: b, sourceUID: sourceUIDOf(r), cuts: map[runtime.Identifier]*cut{}}
	if prev, ok, _ := o.templates.PeekOrAdd(key, t); ok {
		return prev, nil
	}
	return t, nil
}

// templateItem is r's item with the placeholders p in the three fields.
func templateItem(r merge.Result, p placeholders, stale Staleness, kind schema.GroupVersionKind) (runtime.Object, error) {
	obj, err := item(p[fieldNamespace], r, p[fieldResourceVersion], stale, kind)
	if err != nil {
		return nil, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	m.SetUID(types.UID(p[fieldUID]))
	return obj, nil
}

func sourceUIDOf(r merge.Result) types.UID {
	if r.Item.FromCandidate != "" {
		return r.Item.UID // the stable source's, as item has it
	}
	if m, err := meta.Accessor(r.Item.Object); err == nil {
		return m.GetUID()
	}
	return ""
}

// cutFor returns the template's encoding with id, cut, making it once.
// When it makes it, it first encodes the item of the member s that asks,
// whole, and returns those bytes (or the error) as own: s's encoding, to
// write as it is. own is nil when the cut was made before.
func (t *itemTemplate) cutFor(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, s *splicedObject) (c *cut, own *bytes.Buffer, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c, ok := t.cuts[id]; ok {
		return c, nil, nil
	}
	c = &cut{}
	t.cuts[id] = c
	// s's item first: an encoder that keeps state between calls (table
	// headers on the first call only) gives it what it meant for this
	// call. encode owns what it is given: copies, never the template.
	mine := &bytes.Buffer{}
	obj, err := s.object()
	if err == nil {
		err = encode(obj.DeepCopyObject(), mine)
	}
	if err != nil {
		return c, nil, err // each item encodes whole, and reports its own error
	}
	var a, b bytes.Buffer
	if encode(t.a.DeepCopyObject(), &a) != nil || encode(t.b.DeepCopyObject(), &b) != nil {
		return c, mine, nil
	}
	if !json.Valid(a.Bytes()) || !json.Valid(b.Bytes()) {
		return c, mine, nil
	}
	parts, fields, ok := cutAt(a.Bytes(), cutA)
	if !ok {
		return c, mine, nil
	}
	try := &cut{parts: parts, fields: fields}
	values := s.values()
	if !bytes.Equal(try.splice(checkB), b.Bytes()) || !valuesSpliceable(values) || !bytes.Equal(try.splice(values), mine.Bytes()) {
		return c, mine, nil
	}
	c.parts, c.fields, c.ok = parts, fields, true
	return c, mine, nil
}

// cutAt cuts encoded at every occurrence of the placeholders p. ok is false
// when one of them is missing, or occurrences overlap.
func cutAt(encoded []byte, p placeholders) (parts [][]byte, fields []int, ok bool) {
	type hit struct{ at, field int }
	var hits []hit
	for f, v := range p {
		n := 0
		for i := 0; ; {
			j := bytes.Index(encoded[i:], []byte(v))
			if j < 0 {
				break
			}
			hits = append(hits, hit{i + j, f})
			i += j + len(v)
			n++
		}
		if n == 0 {
			return nil, nil, false
		}
	}
	sort.Slice(hits, func(i, j int) bool { return hits[i].at < hits[j].at })
	from := 0
	for _, h := range hits {
		if h.at < from {
			return nil, nil, false
		}
		parts = append(parts, encoded[from:h.at])
		fields = append(fields, h.field)
		from = h.at + len(p[h.field])
	}
	return append(parts, encoded[from:]), fields, true
}

// splice joins the cut's parts with values.
func (c *cut) splice(values placeholders) []byte {
	n := 0
	for _, p := range c.parts {
		n += len(p)
	}
	for _, f := range c.fields {
		n += len(values[f])
	}
	return c.appendSplice(make([]byte, 0, n), values)
}

// appendSplice appends the cut's parts joined with values to out.
func (c *cut) appendSplice(out []byte, values placeholders) []byte {
	for i, p := range c.parts {
		out = append(out, p...)
		if i < len(c.fields) {
			out = append(out, values[c.fields[i]]...)
		}
	}
	return out
}

// spliceBuffers are the buffers spliced events are written from: a
// fan-out writes thousands of them at once, each to a writer that copies
// it, and allocating each was a tenth of its garbage. Buffers grown past
// maxPooledSplice (a large item) are left to the collector.
var spliceBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

const maxPooledSplice = 64 << 10

// CacheEncode implements runtime.CacheableObject: the template's encoding
// with this item's values spliced in, or, for an encoding that doesn't
// splice, the whole item encoded.
func (s *splicedObject) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	values := s.values()
	c, own, err := s.t.cutFor(id, encode, s)
	switch {
	case err != nil:
		return err
	case own != nil:
		_, err := w.Write(own.Bytes())
		return err
	case c.ok && valuesSpliceable(values):
		// One write: a framer may make a frame of each. The buffer is
		// reused: a writer keeps nothing of what it is given (io.Writer).
		buf := spliceBuffers.Get().(*[]byte)
		*buf = c.appendSplice((*buf)[:0], values)
		_, err := w.Write(*buf)
		if err == nil && cap(*buf) <= maxPooledSplice {
			// Not after a failed write: HTTP/2 may still hold a large
			// frame's bytes when it reports its stream closed.
			spliceBuffers.Put(buf)
		}
		return err
	}
	obj, err := s.object()
	if err != nil {
		return err
	}
	return encode(obj.DeepCopyObject(), w)
}

// values are the item's own values of the three fields.
func (s *splicedObject) values() placeholders {
	return placeholders{s.namespace, string(UID(s.t.sourceUID, s.namespace)), s.rv}
}

// valuesSpliceable reports whether an item's values splice: its namespace
// and uid (a version is digits).
func valuesSpliceable(v placeholders) bool {
	return spliceable(v[fieldNamespace]) && spliceable(v[fieldUID])
}

// object returns the whole item, built once; shared: read only.
func (s *splicedObject) object() (runtime.Object, error) {
	s.once.Do(func() { s.obj, s.err = item(s.namespace, s.r, s.rv, s.o.stale, s.o.kindOf(s.resource)) })
	return s.obj, s.err
}

// GetObject implements runtime.CacheableObject: a copy, the caller's to keep.
func (s *splicedObject) GetObject() runtime.Object {
	obj, err := s.object()
	if err != nil {
		// Not met: the template was built from the same result by the
		// same function, so the item builds too. The template's
		// namespace and version tell a reader something is wrong.
		return s.t.a.DeepCopyObject()
	}
	return obj.DeepCopyObject()
}

// GetObjectKind implements runtime.Object on a copy: the shared item is never changed.
func (s *splicedObject) GetObjectKind() schema.ObjectKind { return s.GetObject().GetObjectKind() }

// DeepCopyObject implements runtime.Object.
func (s *splicedObject) DeepCopyObject() runtime.Object { return s.GetObject() }
