package admission

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
)

// memory is what this replica's guards remember, as entries.
func (g *Guards) memory() Record {
	var out Record
	g.hierarchy.mu.Lock()
	for name, a := range g.hierarchy.byName {
		meta := cloneMeta(a.meta)
		e := Entry{Kind: entryNamespace, Name: name, Meta: &meta, Until: a.until}
		if a.old != nil {
			old := cloneMeta(*a.old)
			e.Old = &old
		}
		for _, o := range a.older {
			e.Older = append(e.Older, cloneMeta(o))
		}
		out.Entries = append(out.Entries, e)
	}
	g.hierarchy.mu.Unlock()
	r := g.recent
	r.settleLocks()
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, l := range r.locks {
		out.Entries = append(out.Entries, Entry{Kind: entryLock, Resource: k.resource, Namespace: k.namespace, Name: k.name, Object: objectOf(l.obj), Writes: slices.Clone(l.writes), Until: l.until})
	}
	for k, a := range r.adopted {
		out.Entries = append(out.Entries, Entry{Kind: entryAdopted, Resource: k.resource, Namespace: k.namespace, Name: k.name, Object: objectOf(a.obj), Until: a.until})
	}
	for k, c := range r.candidates {
		out.Entries = append(out.Entries, Entry{Kind: entryCandidate, Resource: k.resource, Namespace: k.namespace, Name: k.name, Candidate: c.name, Locked: c.locked, Until: c.until})
	}
	return out
}

// takeIn adds the record's entries to what this replica's guards remember,
// where they remember nothing of that key as late. A candidate this
// replica forgot (its mirror showed it land, then go) stays forgotten.
func (g *Guards) takeIn(rec Record) {
	g.hierarchy.mu.Lock()
	now := g.hierarchy.clock.Now()
	for _, e := range rec.Entries {
		if e.Kind != entryNamespace || e.Meta == nil || now.After(e.Until) {
			continue
		}
		if cur, ok := g.hierarchy.byName[e.Name]; ok && !e.Until.After(cur.until) {
			// This replica's later change, admitted over the entry's
			// before the mirror showed it: the entry's old is older.
			if cur.old != nil && e.Old != nil && hierarchyKeys(*cur.old) == hierarchyKeys(*e.Meta) {
				cur.older = append(append(cur.older, e.Older...), *e.Old)
				g.hierarchy.byName[e.Name] = cur
			}
			continue
		}
		a := assumption{meta: cloneMeta(*e.Meta), until: e.Until}
		if e.Old != nil {
			old := cloneMeta(*e.Old)
			a.old = &old
		}
		for _, o := range e.Older {
			a.older = append(a.older, cloneMeta(o))
		}
		g.hierarchy.byName[e.Name] = a
	}
	g.hierarchy.mu.Unlock()
	r := g.recent
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range rec.Entries {
		if now.After(e.Until) {
			continue
		}
		k := recentKey{e.Resource, e.Namespace, e.Name}
		switch e.Kind {
		case entryLock:
			// Every write of either memory counts until this replica's
			// mirror shows it settled; the later entry's object and end.
			l := recentObject{obj: unstructuredOf(e.Object), until: e.Until}
			for _, w := range e.Writes {
				if !r.isSettled(k, w) {
					l.writes = append(l.writes, w)
				}
			}
			switch {
			case len(e.Writes) == 0:
				l.writes = []LockWrite{{}} // not known: kept until its end
			case len(l.writes) == 0:
				continue // this replica's mirror showed them all settled
			}
			cur, ok := r.locks[k]
			if !ok || now.After(cur.until) {
				r.locks[k] = l
				continue
			}
			if !e.Until.After(cur.until) {
				l.obj, l.until = cur.obj, cur.until
			}
			l.writes = unionWrites(cur.writes, l.writes)
			r.locks[k] = l
		case entryAdopted:
			if cur, ok := r.adopted[k]; !ok || e.Until.After(cur.until) {
				r.adopted[k] = recentObject{obj: unstructuredOf(e.Object), until: e.Until}
			}
		case entryCandidate:
			if f, ok := r.forgotten[k]; ok && f.Equal(e.Until) {
				continue
			}
			if cur, ok := r.candidates[k]; !ok || e.Until.After(cur.until) {
				r.candidates[k] = recentCandidate{name: e.Candidate, locked: e.Locked, until: e.Until}
			}
		}
	}
}

func cloneMeta(m whatif.NamespaceMeta) whatif.NamespaceMeta {
	return whatif.NamespaceMeta{Labels: maps.Clone(m.Labels), Annotations: maps.Clone(m.Annotations), Gone: m.Gone}
}

// objectOf is u as the record keeps it: without its managed fields and
// kubectl's last applied configuration, which no decision reads.
func objectOf(u *unstructured.Unstructured) map[string]any {
	if u == nil {
		return nil
	}
	c := u.DeepCopy()
	c.SetManagedFields(nil)
	if a := c.GetAnnotations(); a != nil {
		delete(a, corev1.LastAppliedConfigAnnotation)
		c.SetAnnotations(a)
	}
	return c.Object
}

func unstructuredOf(o map[string]any) *unstructured.Unstructured {
	if o == nil {
		return nil
	}
	return (&unstructured.Unstructured{Object: o}).DeepCopy()
}

// unionWrites is the writes of a and of b, each once.
func unionWrites(a, b []LockWrite) []LockWrite {
	out := slices.Clone(a)
	for _, w := range b {
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}
