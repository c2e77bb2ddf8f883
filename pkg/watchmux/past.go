package watchmux

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// Serving a version this instance has no history for (another replica's,
// an earlier run's, one older than the history): the view at that version
// is merged from the sources as they were at its vector, listed from
// kube-apiserver with resourceVersionMatch=Exact, and the watch starts with
// the difference between it and the current view, for its scope only.

// pastState is the sources at a version: after, at its vector, and, for a
// version inside a change, before, at the vector before the change.
type pastState struct {
	after, before *state
}

// pastCacheSize bounds the past states kept (Mux.past), shared by the
// watches that resume from the same version (after a restart, most clients
// resume from the same last event or bookmark), each built once: each
// holds the sources once.
const pastCacheSize = 4

func newPastCache() *onceCache[string, *pastState] {
	return newOnceCache[string](pastCacheSize, pastCacheSize, func(*pastState) int { return 1 })
}

// pastConfig is what a past state is merged with: the current
// configuration (the fingerprint says it is the version's).
type pastConfig struct {
	policy    merge.Policy
	resources []string
	options   map[string]merge.Options
	globals   map[string]string
	pending   sets.Set[string]
	hub       string
	keys      []string
	lists     map[string]ListFunc
	// membership is the registration's source key, "" when none is fed.
	membership string
}

func (m *Mux) pastConfigLocked() pastConfig {
	s := m.st
	lists := make(map[string]ListFunc, len(m.pos.lists))
	for k, f := range m.pos.lists {
		lists[k] = f
	}
	options := make(map[string]merge.Options, len(s.options))
	for k, o := range s.options {
		options[k] = o
	}
	globals := make(map[string]string, len(s.globals))
	for k, g := range s.globals {
		globals[k] = g
	}
	return pastConfig{
		policy: s.policy, resources: slices.Clone(s.resources), options: options, globals: globals,
		pending: s.pending.Clone(), hub: m.hub, keys: slices.Clone(m.pos.sortedKeys()), lists: lists,
		membership: m.membershipKey,
	}
}

// errNoLister: a source has no exact lister (tests, or a wiring without
// one): versions without history can't be served.
var errNoLister = fmt.Errorf("no exact lister of the sources")

// pastBuildTimeout bounds the lists of one shared build (a past state, or
// one exact list of the scoped caches). The requests that wait for it wait
// pastWait at most.
const pastBuildTimeout = time.Minute

// sharedBuild is build with a context of its own, for a build the caches
// share: its lists don't end with the request that started them, only
// after pastBuildTimeout.
func sharedBuild[V any](ctx context.Context, build func(ctx context.Context) (V, error)) func() (V, error) {
	detached := context.WithoutCancel(ctx)
	return func() (V, error) {
		ctx, cancel := context.WithTimeout(detached, pastBuildTimeout)
		defer cancel()
		return build(ctx)
	}
}

// pastStateOf returns the sources at want, listed from kube-apiserver. The
// lists are shared by every watch that resumes from the same state; the
// caller waits for them until ctx ends.
func (m *Mux) pastStateOf(ctx context.Context, c pastConfig, want rv.Version) (*pastState, error) {
	key := rv.Version{Fingerprint: want.Fingerprint, Vector: want.Vector, Mid: midKey(want.Mid)}.String()
	return m.past.get(ctx, key, sharedBuild(ctx, func(ctx context.Context) (*pastState, error) {
		lists := map[string][]runtime.Object{}
		listAt := func(i int, rev uint64) ([]runtime.Object, error) {
			key := c.keys[i]
			if rev == 0 {
				return nil, nil // nothing seen of the source: no objects
			}
			f := c.lists[key]
			if f == nil {
				return nil, errNoLister
			}
			objs, err := f(ctx, strconv.FormatUint(rev, 10), "")
			if err != nil {
				return nil, fmt.Errorf("listing %s at revision %d: %w", key, rev, err)
			}
			return objs, nil
		}
		for i := range c.keys {
			objs, err := listAt(i, want.Vector[i])
			if err != nil {
				return nil, err
			}
			lists[c.keys[i]] = objs
		}
		out := &pastState{after: c.build(lists)}
		if want.Mid != nil {
			for _, part := range want.Mid.Moved() {
				objs, err := listAt(part.K, part.Prev)
				if err != nil {
					return nil, err
				}
				lists[c.keys[part.K]] = objs
			}
			out.before = c.build(lists)
		}
		return out, nil
	}))
}

// midKey is the part of a Mid that names states (not the position).
func midKey(m *rv.Mid) *rv.Mid {
	if m == nil {
		return nil
	}
	return &rv.Mid{K: m.K, Prev: m.Prev, Namespace: "-", Also: m.Also}
}

// build makes a state of the listed objects, by source key, as the feed
// would have from those objects.
func (c pastConfig) build(lists map[string][]runtime.Object) *state {
	var namespaces []*merge.Namespace
	for _, o := range lists[namespacesKey] {
		if ns, ok := o.(*corev1.Namespace); ok {
			namespaces = append(namespaces, merge.NamespaceOf(ns))
		}
	}
	return c.buildWith(namespaces, lists)
}

// buildWith is build with the namespaces given (shared, read only), and
// the sources of lists.
func (c pastConfig) buildWith(namespaces []*merge.Namespace, lists map[string][]runtime.Object) *state {
	s := newState(c.policy, slices.Clone(c.resources))
	for k, o := range c.options {
		s.options[k] = o
	}
	for k, g := range c.globals {
		s.globals[k] = g
	}
	s.pending = c.pending.Clone()
	if c.membership != "" {
		s.membership = membershipOf(lists[c.membership])
	}
	for _, ns := range namespaces {
		s.setNamespaceLocked(ns.Name, ns)
	}
	for _, resource := range c.resources {
		for _, cluster := range []string{"", c.hub} {
			if cluster == "" && len(lists[resource]) == 0 || cluster != "" && c.hub == "" {
				continue
			}
			for _, o := range lists[sourceKey(resource, cluster)] {
				acc, err := meta.Accessor(o)
				if err != nil || v1alpha1.IsMaterialized(acc.GetLabels()) {
					continue
				}
				if c.hub != "" && cluster == "" && acc.GetNamespace() == c.policy.GlobalNamespace {
					continue
				}
				s.setItemLocked(resource, acc.GetNamespace(), acc.GetName(), sourceItem(acc.GetNamespace(), acc.GetName(), acc, o, cluster))
			}
		}
	}
	return s
}

// view is namespace's view of resource (item name only, when set) as a
// client at want holds it: at the vector after, or, inside a change, the
// namespaces before want's in order at after, those past it before the
// change, and its own with its first Index+1 events of the change.
func (p *pastState) view(want rv.Version, resource, namespace, name string) []merge.Result {
	if want.Mid == nil || namespace < want.Mid.Namespace {
		return p.after.results(resource, namespace, name)
	}
	before := p.before.results(resource, namespace, name)
	if namespace > want.Mid.Namespace {
		return before
	}
	// The change's events in this namespace are those of the whole view,
	// by name: the first Index+1 names are seen.
	// The two states' objects of the changed source come from two lists:
	// told apart by uid and resourceVersion, not by pointer.
	full := diffWith(resource, namespace, p.before.results(resource, namespace, ""), p.after.results(resource, namespace, ""), sameContent)
	if len(full) > want.Mid.Index+1 {
		full = full[:want.Mid.Index+1]
	}
	seen := map[string]*Event{}
	for _, e := range full {
		seen[e.Name] = e
	}
	var out []merge.Result
	for _, r := range before {
		if _, ok := seen[r.Item.Name]; !ok {
			out = append(out, r)
		}
	}
	for n, e := range seen {
		if name != "" && n != name || e.Type == watch.Deleted {
			continue
		}
		out = append(out, e.Result)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Item.Name < out[j].Item.Name })
	return out
}

// namespaces are the namespaces whose views a client at want may hold.
func (p *pastState) namespaces() []string {
	set := sets.New(p.after.namespaceNames()...)
	if p.before != nil {
		set.Insert(p.before.namespaceNames()...)
	}
	return sets.List(set)
}

// sameContent is sameResult for results of different mirrors: the source
// objects are told by their uid and resourceVersion, not by pointer.
func sameContent(a, b merge.Result) bool {
	return sameObject(a.Item.Object, b.Item.Object) && a.Item.Namespace == b.Item.Namespace &&
		a.Item.UID == b.Item.UID && a.Item.FromCandidate == b.Item.FromCandidate &&
		a.Scope == b.Scope && slices.Equal(a.Conflicts, b.Conflicts) &&
		slices.EqualFunc(a.Overlays, b.Overlays, func(x, y merge.Item) bool {
			return sameObject(x.Object, y.Object) && x.FromCandidate == y.FromCandidate
		}) &&
		(a.Object == b.Object || equality.Semantic.DeepEqual(a.Object, b.Object))
}

func sameObject(a, b any) bool {
	if a == b {
		return true
	}
	x, errA := meta.Accessor(a)
	y, errB := meta.Accessor(b)
	if errA != nil || errB != nil {
		return false
	}
	if x.GetResourceVersion() == "" {
		return equality.Semantic.DeepEqual(a, b)
	}
	return x.GetUID() == y.GetUID() && x.GetResourceVersion() == y.GetResourceVersion() &&
		x.GetNamespace() == y.GetNamespace() && x.GetName() == y.GetName()
}
