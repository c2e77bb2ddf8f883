package views

import (
	"context"
	"errors"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// freezer is a Mux that copies a resource's mirror out of its lock
// (*watchmux.Mux): what lists stream from.
type freezer interface {
	Freeze(resource string) (*watchmux.Frozen, error)
}

var _ registry.Streamer = &View{}

// Stream returns the view of namespace (every namespace's for ""), of
// item name only when set, at the current version, as items produced on
// demand: a list encodes them as they are merged, one namespace at a
// time. Lists at the same version share the mirror's frozen copy. It
// implements registry.Streamer; a Mux that can't freeze answers
// errors.ErrUnsupported.
func (v *View) Stream(_ context.Context, namespace, name string) (registry.ItemStream, string, error) {
	fz, ok := v.mux.(freezer)
	if !ok {
		return nil, "", errors.ErrUnsupported
	}
	f, err := fz.Freeze(v.resource.Resource)
	if err != nil {
		return nil, "", v.readError(err)
	}
	return &itemStream{view: v, f: f, namespace: namespace, name: name}, f.Version(), nil
}

// itemStream is a view's items at one frozen version, in storage key order.
type itemStream struct {
	view      *View
	f         *watchmux.Frozen
	namespace string
	name      string
}

// from returns the namespaces whose items may follow the storage key
// after ("" for every item), and the name in the first of them after
// which its items follow ("" for all of them).
func (s *itemStream) from(after string) ([]string, string) {
	if s.namespace == "" {
		i, skip := s.f.After(after)
		return s.f.Namespaces()[i:], skip
	}
	prefix := s.namespace + "/"
	switch {
	case after == "":
		return []string{s.namespace}, ""
	case strings.HasPrefix(after, prefix):
		return []string{s.namespace}, strings.TrimPrefix(after, prefix)
	case prefix > after:
		return []string{s.namespace}, ""
	}
	return nil, ""
}

// Walk implements registry.ItemStream.
func (s *itemStream) Walk(after string, yield func(key string, obj runtime.Object) bool) error {
	namespaces, skip := s.from(after)
	rv := s.f.Version()
	kind := s.view.kind
	for i, ns := range namespaces {
		for _, r := range s.f.Results(ns, s.name) {
			if i == 0 && skip != "" && r.Item.Name <= skip {
				continue
			}
			obj, err := item(ns, r, rv, s.view.stale, kind)
			if err != nil {
				return err
			}
			if !yield(ns+"/"+r.Item.Name, obj) {
				return nil
			}
		}
	}
	return nil
}

// CountAfter implements registry.ItemStream: merged, never built.
func (s *itemStream) CountAfter(after string) (int64, error) {
	namespaces, skip := s.from(after)
	var n int64
	for i, ns := range namespaces {
		if (i == 0 && skip != "") || s.name != "" {
			for _, r := range s.f.Results(ns, s.name) {
				if i != 0 || skip == "" || r.Item.Name > skip {
					n++
				}
			}
			continue
		}
		n += int64(s.f.Count(ns))
	}
	return n, nil
}
