package whatif

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// SourceRef names a source: its view resource, namespace and name.
type SourceRef struct{ Resource, Namespace, Name string }

// Pending are source writes the guards admitted a moment ago that the
// mirror may not show yet: sources admitted locked, and materialized
// copies made their namespace's own. Applied, they can only add locked
// items, and objects standing under them: judgements made with them are
// only stricter.
type Pending struct {
	Locked, Owned []SourceRef
	// objects are the Locked and Owned objects as written: sources the
	// mirror may not show yet.
	objects map[SourceRef]*unstructured.Unstructured
	// found are sources as the request being judged found them (nil:
	// absent), whatever the mirror or the other pending writes say.
	found map[SourceRef]*unstructured.Unstructured
}

// Found records that the request being judged found the source ref as obj
// (nil: absent), as kube-apiserver sent it: ref is read so, whatever the
// mirror or the pending writes say. A write admitted a moment ago may be
// this very request's, decided before (a turn on the shared record that
// conflicted, or kube-apiserver asking again): judged from the state it
// makes, the request would change nothing.
func (p *Pending) Found(ref SourceRef, obj *unstructured.Unstructured) {
	if p.found == nil {
		p.found = map[SourceRef]*unstructured.Unstructured{}
	}
	p.found[ref] = obj
}

// WithoutOwned is p without the objects made or created their namespace's
// own (Owned): a create admitted by one guard may be refused by another
// and never come, and applied, such an object (locked, above) can hide a
// locked item that did come from a comparison of before and after. Judged
// both with and without them, a decision can only be stricter.
func (p Pending) WithoutOwned() Pending {
	out := Pending{Locked: p.Locked, found: p.found}
	for _, ref := range p.Locked {
		if obj := p.objects[ref]; obj != nil {
			out.addObject(ref, obj)
		}
	}
	return out
}

// AddLocked records the source ref admitted locked, as obj.
func (p *Pending) AddLocked(ref SourceRef, obj *unstructured.Unstructured) {
	p.Locked = append(p.Locked, ref)
	p.addObject(ref, obj)
}

// AddOwned records the copy ref made its namespace's own, as obj.
func (p *Pending) AddOwned(ref SourceRef, obj *unstructured.Unstructured) {
	p.Owned = append(p.Owned, ref)
	p.addObject(ref, obj)
}

func (p *Pending) addObject(ref SourceRef, obj *unstructured.Unstructured) {
	if p.objects == nil {
		p.objects = map[SourceRef]*unstructured.Unstructured{}
	}
	p.objects[ref] = obj
}

// over returns r with p's locks applied: a source admitted locked is read
// as locked, and its name is among the locked names.
func (p Pending) over(r watchmux.Reader) watchmux.Reader {
	if len(p.Locked) == 0 && len(p.Owned) == 0 && len(p.found) == 0 {
		return r
	}
	return pendingReader{Reader: r, p: p}
}

func (p Pending) owns(resource, namespace, name string) bool {
	return slices.Contains(p.Owned, SourceRef{resource, namespace, name})
}

// pendingReader is a mirror with pending locks applied.
type pendingReader struct {
	watchmux.Reader
	p Pending
}

// Source implements watchmux.Reader: a source admitted locked is locked,
// and a copy made its namespace's own is a source, as written, until the
// mirror shows it; a source the request found is as it found it.
func (r pendingReader) Source(resource, namespace, name string) (merge.Item, bool) {
	ref := SourceRef{resource, namespace, name}
	if obj, ok := r.p.found[ref]; ok {
		if obj == nil {
			return merge.Item{}, false
		}
		return itemOf(namespace, name, obj), true
	}
	it, ok := r.Reader.Source(resource, namespace, name)
	if obj := r.p.objects[ref]; !ok && obj != nil {
		it, ok = itemOf(namespace, name, obj), true
	}
	if ok && slices.Contains(r.p.Locked, ref) {
		it.Locked = true
	}
	return it, ok
}

// LockedNames implements watchmux.Reader, with the names admitted locked.
func (r pendingReader) LockedNames(resource string) []string {
	names := r.Reader.LockedNames(resource)
	for _, l := range r.p.Locked {
		if l.Resource == resource && !slices.Contains(names, l.Name) {
			names = append(names, l.Name)
		}
	}
	for _, o := range r.p.Owned {
		if obj := r.p.objects[o]; o.Resource == resource && obj != nil && merge.IsLocked(obj.GetAnnotations()) && !slices.Contains(names, o.Name) {
			names = append(names, o.Name)
		}
	}
	for f, obj := range r.p.found {
		if f.Resource == resource && obj != nil && merge.IsLocked(obj.GetAnnotations()) && !slices.Contains(names, f.Name) {
			names = append(names, f.Name)
		}
	}
	slices.Sort(names)
	return names
}

// NameItems implements watchmux.Reader: a source admitted a moment ago as
// a candidate for name (a lock that came to stand in for it) is among the
// items name is merged from, as written, until the mirror shows it; a
// source the request found is as it found it.
func (r pendingReader) NameItems(resource, namespace, name string) []merge.Item {
	items := slices.Clone(r.Reader.NameItems(resource, namespace, name))
	put := func(ref SourceRef, it *merge.Item) {
		i := slices.IndexFunc(items, func(x merge.Item) bool { return x.Name == ref.Name })
		switch {
		case it == nil && i >= 0:
			items = slices.Delete(items, i, i+1)
		case it != nil && i >= 0:
			items[i] = *it
		case it != nil:
			items = append(items, *it)
		}
	}
	var refs []SourceRef
	for _, ref := range r.p.Locked {
		if _, found := r.p.found[ref]; !found && ref.Resource == resource && ref.Namespace == namespace && r.p.objects[ref] != nil {
			refs = append(refs, ref)
		}
	}
	slices.SortFunc(refs, func(a, b SourceRef) int { return strings.Compare(a.Name, b.Name) })
	for _, ref := range refs {
		if it := r.pendingItem(ref); it.Candidate != nil && it.Candidate.For == name {
			put(ref, &it)
		}
	}
	for ref, obj := range r.p.found {
		if ref.Resource != resource || ref.Namespace != namespace {
			continue
		}
		if obj == nil {
			put(ref, nil)
			continue
		}
		it := sourceItemOf(namespace, ref.Name, obj)
		if ref.Name == name || it.Candidate != nil && it.Candidate.For == name {
			put(ref, &it)
		} else {
			put(ref, nil)
		}
	}
	return items
}

// pendingItem is the source ref admitted locked as the mirror's item of it
// will be, locked.
func (r pendingReader) pendingItem(ref SourceRef) merge.Item {
	it := sourceItemOf(ref.Namespace, ref.Name, r.p.objects[ref])
	it.Locked = true
	return it
}

// sourceItemOf is itemOf with the candidate its annotations make it
// (watchmux's sourceItem: a candidate whatever their errors).
func sourceItemOf(namespace, name string, obj *unstructured.Unstructured) merge.Item {
	it := itemOf(namespace, name, obj)
	it.Candidate, _ = merge.ParseCandidate(name, obj.GetAnnotations())
	return it
}

// itemOf is the source namespace/name written as obj, as the mirror would
// hold it.
func itemOf(namespace, name string, obj *unstructured.Unstructured) merge.Item {
	return merge.Item{Namespace: namespace, Name: name, UID: obj.GetUID(), Object: obj,
		Locked: merge.IsLocked(obj.GetAnnotations()), Exceptions: merge.ExceptionRulesOf(obj.GetAnnotations()), Overlay: merge.WantsOverlay(obj.GetAnnotations())}
}
