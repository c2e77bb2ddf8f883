package watchmux

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// A one-namespace resume (or exact list) needs one namespace's view of one
// resource at the version: the namespaces, for its lineage, and that
// resource's sources in the namespaces its merge reads (the namespace, its
// ancestors, the resource's global namespace; with a hub, the hub's
// global namespace). It lists those only, each namespace's sources with
// its own exact list. The lists are cached by source, revision and
// namespace: the resumes of many namespaces from one version (a bookmark
// every client of a restarted replica holds) list the namespaces and the
// global namespace once.

// Bounds of the caches of exact lists: the namespaces at a few revisions,
// and the per-namespace lists of the sources, by entries and objects held.
const (
	namespaceListsKept = 4
	scopedListsKept    = 4096
	scopedObjectsKept  = 200_000
)

// fullListAfter: once that many namespaces' sources were listed at one
// revision of a source (the clients of many namespaces resuming from one
// bookmark), the source is listed once in full at that revision and the
// next namespaces read it, unless it holds more than scopedObjectsKept
// objects; it is listed once: dropped from the cache, the next namespaces
// are listed one by one again. Requests to kube-apiserver stay bounded
// either way.
const fullListAfter = 64

// keyRev names a source at a revision.
type keyRev struct {
	key string
	rev uint64
}

// errTooLarge: a full list too large to keep, or listed once and dropped
// since (the cache keeps a few); namespaces are listed one by one.
var errTooLarge = errors.New("too many objects to keep")

// listKey names an exact list: a source, a revision and a namespace.
type listKey struct {
	key       string
	rev       uint64
	namespace string
}

// scopedLists are the caches a one-namespace past state is built from.
type scopedLists struct {
	namespaces *onceCache[uint64, map[string]*merge.Namespace]
	sources    *onceCache[listKey, []runtime.Object]
	// full holds full lists, by namespace, of sources many namespaces
	// were listed from at one revision.
	full *onceCache[keyRev, map[string][]runtime.Object]

	mu sync.Mutex
	// listed counts the namespaces listed at each source revision;
	// tooLarge marks those whose full list is too large to keep, or was
	// listed and dropped: listed again for each namespace that comes
	// after, full lists would cost more than the namespaces' own.
	listed   map[keyRev]int
	tooLarge map[keyRev]bool
	// fullListed marks the source revisions listed in full.
	fullListed map[keyRev]bool
}

func newScopedLists() *scopedLists {
	return &scopedLists{
		namespaces: newOnceCache[uint64](namespaceListsKept, 1<<62, func(m map[string]*merge.Namespace) int { return len(m) }),
		sources:    newOnceCache[listKey](scopedListsKept, scopedObjectsKept, func(objs []runtime.Object) int { return len(objs) }),
		full: newOnceCache[keyRev](namespaceListsKept, scopedObjectsKept, func(m map[string][]runtime.Object) int {
			n := 0
			for _, objs := range m {
				n += len(objs)
			}
			return n
		}),
		listed:     map[keyRev]int{},
		tooLarge:   map[keyRev]bool{},
		fullListed: map[keyRev]bool{},
	}
}

// count records add more namespaces listed at kr and reports whether
// kr's full list should be read instead from now on.
func (l *scopedLists) count(kr keyRev, add int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.listed) > scopedListsKept {
		clear(l.listed) // the counts only steer; forgetting them is safe
	}
	if len(l.tooLarge) > scopedListsKept {
		clear(l.tooLarge)
	}
	l.listed[kr] += add
	return l.listed[kr] >= fullListAfter && !l.tooLarge[kr]
}

// firstFull reports whether kr was never listed in full before, and
// records that it is.
func (l *scopedLists) firstFull(kr keyRev) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.fullListed) > scopedListsKept {
		clear(l.fullListed)
	}
	first := !l.fullListed[kr]
	l.fullListed[kr] = true
	return first
}

func (l *scopedLists) markTooLarge(kr keyRev) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tooLarge[kr] = true
}

// pastFor is the past state a watch or list of resource in namespace
// ("" for all) reads at want: every source listed in full for all
// namespaces (shared by every resource's resumes from the version), the
// lineage's sources of resource only for one.
func (m *Mux) pastFor(ctx context.Context, c pastConfig, want rv.Version, resource, namespace string) (*pastState, error) {
	if namespace == "" {
		return m.pastStateOf(ctx, c, want)
	}
	return m.pastStateIn(ctx, c, want, resource, namespace)
}

// pastStateIn returns the sources namespace's view of resource is merged
// from at want (and, inside a change, before it).
//
// The lists are shared (sharedBuild): ctx bounds the wait for them, not
// the lists.
func (m *Mux) pastStateIn(ctx context.Context, c pastConfig, want rv.Version, resource, namespace string) (*pastState, error) {
	index := func(key string) int {
		i := sort.SearchStrings(c.keys, key)
		if i < len(c.keys) && c.keys[i] == key {
			return i
		}
		return -1
	}
	lister := func(key string) (ListFunc, error) {
		f := c.lists[key]
		if f == nil {
			return nil, errNoLister
		}
		return f, nil
	}
	namespacesAt := func(rev uint64) (map[string]*merge.Namespace, error) {
		if rev == 0 {
			return nil, nil
		}
		f, err := lister(namespacesKey)
		if err != nil {
			return nil, err
		}
		return m.scoped.namespaces.get(ctx, rev, sharedBuild(ctx, func(ctx context.Context) (map[string]*merge.Namespace, error) {
			objs, err := f(ctx, strconv.FormatUint(rev, 10), "")
			if err != nil {
				return nil, fmt.Errorf("listing %s at revision %d: %w", namespacesKey, rev, err)
			}
			out := make(map[string]*merge.Namespace, len(objs))
			for _, o := range objs {
				if ns, ok := o.(*corev1.Namespace); ok {
					out[ns.Name] = merge.NamespaceOf(ns)
				}
			}
			return out, nil
		}))
	}
	sourcesAt := func(key string, rev uint64, ns string) ([]runtime.Object, error) {
		if rev == 0 {
			return nil, nil
		}
		f, err := lister(key)
		if err != nil {
			return nil, err
		}
		kr := keyRev{key, rev}
		if ns != "" && m.scoped.count(kr, 0) {
			byNS, err := m.scoped.full.get(ctx, kr, sharedBuild(ctx, func(ctx context.Context) (map[string][]runtime.Object, error) {
				if !m.scoped.firstFull(kr) {
					// Listed in full before and dropped since: not once
					// more for each namespace that comes after.
					m.scoped.markTooLarge(kr)
					return nil, errTooLarge
				}
				objs, err := f(ctx, strconv.FormatUint(rev, 10), "")
				if err != nil {
					return nil, fmt.Errorf("listing %s at revision %d: %w", key, rev, err)
				}
				if len(objs) > scopedObjectsKept {
					m.scoped.markTooLarge(kr)
					return nil, errTooLarge
				}
				out := map[string][]runtime.Object{}
				for _, o := range objs {
					if acc, err := meta.Accessor(o); err == nil {
						out[acc.GetNamespace()] = append(out[acc.GetNamespace()], o)
					}
				}
				return out, nil
			}))
			if !errors.Is(err, errTooLarge) {
				return byNS[ns], err
			}
		}
		return m.scoped.sources.get(ctx, listKey{key, rev, ns}, sharedBuild(ctx, func(ctx context.Context) ([]runtime.Object, error) {
			m.scoped.count(kr, 1)
			objs, err := f(ctx, strconv.FormatUint(rev, 10), ns)
			if err != nil {
				return nil, fmt.Errorf("listing %s in %q at revision %d: %w", key, ns, rev, err)
			}
			return objs, nil
		}))
	}

	nsK := index(namespacesKey)
	if nsK < 0 {
		return nil, errNoLister
	}
	global := c.policy.GlobalNamespace
	if g, ok := c.globals[resource]; ok {
		global = g
	}
	// The resource's sources in the local cluster and, with a hub, the hub.
	localKey, hubKey := sourceKey(resource, ""), ""
	if c.hub != "" {
		hubKey = sourceKey(resource, c.hub)
	}
	// A source with objects seen and no lister can't be listed, whatever
	// the lineage turns out to read.
	for _, key := range []string{namespacesKey, localKey, hubKey, c.membership} {
		if k := index(key); k >= 0 && (want.Vector[k] != 0 || want.Before()[k] != 0) && c.lists[key] == nil {
			return nil, errNoLister
		}
	}
	// The namespaces the view reads, and those its lineage walk finds, at
	// the vector after and, for a change of the namespaces, before.
	// Which of the sources this view reads the change a Mid is inside
	// moved: the namespaces, the resource's own (here or in the hub).
	// The cluster's fleet registration, which decides the candidates with
	// implicit.dev/canary-clusters that exist here (membership.go), is
	// read with the sources.
	memK := -1
	if c.membership != "" {
		memK = index(c.membership)
	}
	movedNamespaces, movedSources := false, false
	if want.Mid != nil {
		for _, part := range want.Mid.Moved() {
			switch key := c.keys[part.K]; {
			case part.K == nsK:
				movedNamespaces = true
			case key == localKey || key == hubKey || part.K == memK:
				movedSources = true
			}
		}
	}
	after, err := namespacesAt(want.Vector[nsK])
	if err != nil {
		return nil, err
	}
	before := after
	if movedNamespaces {
		if before, err = namespacesAt(want.Before()[nsK]); err != nil {
			return nil, err
		}
	}
	walkAfter, readAfter := c.reads(after, resource, namespace, global)
	walkBefore, readBefore := walkAfter, readAfter
	if movedNamespaces {
		walkBefore, readBefore = c.reads(before, resource, namespace, global)
	}
	read := sets.List(readAfter.Union(readBefore))

	// The resource's sources in those namespaces: the local cluster's
	// (but its global namespace's, with a hub), and the hub's.
	listSources := func(vector []uint64) (map[string][]runtime.Object, error) {
		lists := map[string][]runtime.Object{}
		if k := index(localKey); k >= 0 {
			for _, ns := range read {
				if c.hub != "" && ns == c.policy.GlobalNamespace {
					continue
				}
				objs, err := sourcesAt(localKey, vector[k], ns)
				if err != nil {
					return nil, err
				}
				lists[localKey] = append(lists[localKey], objs...)
			}
		}
		if k := index(hubKey); hubKey != "" && k >= 0 && slices.Contains(read, global) {
			objs, err := sourcesAt(hubKey, vector[k], "")
			if err != nil {
				return nil, err
			}
			lists[hubKey] = objs
		}
		if memK >= 0 {
			objs, err := sourcesAt(c.membership, vector[memK], "")
			if err != nil {
				return nil, err
			}
			lists[c.membership] = objs
		}
		return lists, nil
	}
	listsAfter, err := listSources(want.Vector)
	if err != nil {
		return nil, err
	}
	out := &pastState{after: c.buildWith(walkAfter, listsAfter)}
	if want.Mid == nil {
		return out, nil
	}
	if !movedNamespaces && !movedSources {
		// Another resource's change: this one's views are the same on
		// both sides of it.
		out.before = out.after
		return out, nil
	}
	listsBefore := listsAfter
	if movedSources {
		if listsBefore, err = listSources(want.Before()); err != nil {
			return nil, err
		}
	}
	out.before = c.buildWith(walkBefore, listsBefore)
	return out, nil
}

// reads resolves namespace's lineage among namespaces: it returns the
// namespaces the walk found (the state a lineage is resolved from again)
// and those whose sources of resource the view merges.
func (c pastConfig) reads(namespaces map[string]*merge.Namespace, resource, namespace, global string) ([]*merge.Namespace, sets.Set[string]) {
	var walk []*merge.Namespace
	seen := sets.New[string]()
	get := func(name string) (*merge.Namespace, bool) {
		ns, ok := namespaces[name]
		if ok && !seen.Has(name) {
			seen.Insert(name)
			walk = append(walk, ns)
		}
		return ns, ok
	}
	l := merge.Resolve(c.policy, namespace, get)
	read := sets.New[string]()
	merge.Levels(l, global, func(ns string) []merge.Item {
		read.Insert(ns)
		return nil
	})
	return walk, read
}
