package registry

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// Streamer is a Viewer whose lists produce their items on demand: a list
// response is encoded as its items are merged (StreamList), and a page
// merges only what it returns, so a list's memory is bounded by a
// namespace's items, not by the view's.
type Streamer interface {
	// Stream returns the current view of namespace (every namespace's for
	// ""), of item name only when set, and the version it is at.
	// errors.ErrUnsupported says the viewer can't (List serves it).
	Stream(ctx context.Context, namespace, name string) (ItemStream, string, error)
}

// ItemStream is a view's items at one version, produced on demand in
// storage key order ("namespace/name"). Safe for concurrent use.
type ItemStream interface {
	// Walk calls yield with each item whose key follows after ("" for
	// every item), in key order, until yield returns false. Each object
	// is new: the caller's to keep.
	Walk(after string, yield func(key string, obj runtime.Object) bool) error
	// CountAfter is the number of items whose key follows after.
	CountAfter(after string) (int64, error)
}

// StreamList is a list response whose items are produced while it is
// encoded: the served group's encoder writes JSON item by item
// (pkg/servedgroup); other encodings and tables read it whole (Whole).
type StreamList struct {
	// List is the list object without its items: kind, resourceVersion.
	List runtime.Object
	each func(yield func(runtime.Object) bool) error
}

var _ runtime.Object = &StreamList{}

// GetObjectKind implements runtime.Object.
func (l *StreamList) GetObjectKind() schema.ObjectKind { return l.List.GetObjectKind() }

// DeepCopyObject implements runtime.Object: the items are produced anew
// by each reader, so copies share the producer.
func (l *StreamList) DeepCopyObject() runtime.Object {
	return &StreamList{List: l.List.DeepCopyObject(), each: l.each}
}

// Each calls yield with each item, in order, until yield returns false.
func (l *StreamList) Each(yield func(runtime.Object) bool) error { return l.each(yield) }

// Whole returns the list object with every item: what the encodings that
// don't stream, and tables, read.
func (l *StreamList) Whole() (runtime.Object, error) {
	var items []runtime.Object
	if err := l.each(func(obj runtime.Object) bool { items = append(items, obj); return true }); err != nil {
		return nil, err
	}
	list := l.List.DeepCopyObject()
	if items == nil {
		items = []runtime.Object{}
	}
	if err := meta.SetList(list, items); err != nil {
		return nil, err
	}
	return list, nil
}

// listStreaming serves a list from the viewer's stream, when the request
// is one the current view answers: a list at or after its version (or of
// any version), and continuations of a streamed snapshot or of the current
// view's version. It reports false for the others (exact lists of older
// versions, versions ahead of the view, continuations of other states):
// List answers them from the whole view as before.
func (s *Storage) listStreaming(ctx context.Context, st Streamer, opts *metainternalversion.ListOptions, ns string, sel selectors, sc listScope) (runtime.Object, bool, error) {
	var o metainternalversion.ListOptions
	if opts != nil {
		o = *opts
	}
	name, _ := sel.field.RequiresExactMatch("metadata.name")
	var stream ItemStream
	var rv, after string
	limit := o.Limit
	uid := s.namespaceUID(sc.namespace) // before the stream: see snapshotKey
	if o.Continue != "" {
		tok, err := decodeContinue(o.Continue)
		if err != nil {
			return nil, true, err
		}
		after = tok.Start
		if tok.RV != "" {
			stream, rv = s.snapshots.getStream(snapshotKey{rv: tok.RV, scope: sc.key, uid: uid}), tok.RV
		}
		if stream == nil {
			if stream, rv, err = st.Stream(ctx, ns, name); err != nil {
				return nil, false, streamErr(err)
			}
			if tok.RV != "" && resourceversion.CompareStrings(tok.RV, rv) != resourceversion.Same {
				return nil, false, nil
			}
		}
	} else {
		var err error
		if stream, rv, err = st.Stream(ctx, ns, name); err != nil {
			return nil, false, streamErr(err)
		}
		if checkVersion(o.ResourceVersion, o.ResourceVersionMatch, rv) != nil {
			return nil, false, nil
		}
		if o.ResourceVersion == "0" {
			limit = 0 // the watch cache ignores limit for "any version" lists
		}
	}
	list := s.kind.NewList()
	if l, err := meta.ListAccessor(list); err == nil {
		l.SetResourceVersion(rv)
	}
	if limit <= 0 {
		if err := meta.SetList(list, []runtime.Object{}); err != nil {
			return nil, true, fmt.Errorf("list of %s: %w", s.kind.Resource(), err)
		}
		return &StreamList{List: list, each: func(yield func(runtime.Object) bool) error {
			return stream.Walk(after, func(_ string, obj runtime.Object) bool {
				return !sel.matches(obj) || yield(obj)
			})
		}}, true, nil
	}
	p, err := pageOfStream(stream, after, limit, rv, sel, sc.filtered)
	if err != nil {
		return nil, true, err
	}
	if p.continue_ != "" {
		s.snapshots.putStream(snapshotKey{rv: rv, scope: sc.key, uid: uid}, stream)
	}
	if err := meta.SetList(list, p.items); err != nil {
		return nil, true, fmt.Errorf("list of %s: %w", s.kind.Resource(), err)
	}
	if l, err := meta.ListAccessor(list); err == nil {
		l.SetContinue(p.continue_)
		l.SetRemainingItemCount(p.remaining)
	}
	return list, true, nil
}

// pageOfStream is pageOf of a stream: up to limit items that pass the
// selectors after the key after, a continue token when more follow, and
// their count when no selector filters the list.
func pageOfStream(stream ItemStream, after string, limit int64, rv string, sel selectors, filtered bool) (page, error) {
	p := page{rv: rv}
	var last string
	more := false
	err := stream.Walk(after, func(key string, obj runtime.Object) bool {
		if !sel.matches(obj) {
			return true
		}
		if int64(len(p.items)) == limit {
			more = true
			return false
		}
		p.items = append(p.items, obj)
		last = key
		return true
	})
	if err != nil || !more {
		return p, err
	}
	p.continue_ = encodeContinue(rv, last)
	if !filtered {
		n, err := stream.CountAfter(last)
		if err != nil {
			return page{}, err
		}
		p.remaining = &n
	}
	return p, nil
}

// streamErr is a Stream error as List answers it: none for a viewer that
// can't stream (List serves the request from the whole view).
func streamErr(err error) error {
	if errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	return err
}
