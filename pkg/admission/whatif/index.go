package whatif

import (
	"fmt"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// Views is what the guards read the sources through: *watchmux.Mux.
type Views interface {
	// Read calls f with the mirror as of one resourceVersion; it fails
	// before the sources are read.
	Read(f func(watchmux.Reader)) (string, error)
	// Changed signals, coalesced, that the mirror changed.
	Changed() <-chan struct{}
}

// Index answers the guards' questions (the small interfaces of
// admission.Mirror, each declared by the guard that asks it) and
// ConditionSync's (webhookconfig.Guarded) from the mirror, each inside one Read, and changes nothing.
// Before the sources are read, the questions that return an error fail
// with one watchmux.IsNotSynced recognises, and the others answer as of an
// empty mirror (nothing exists, nothing is inherited). The guards never ask
// them then: their handler answers 503 until Synced (the server is not ready
// either, so no webhook call reaches it through its Service; one that comes
// by URL gets the webhook's failure policy).
type Index struct {
	views Views
}

var _ webhookconfig.Guarded = &Index{}

// New returns the index of the guards that reads views.
func New(views Views) *Index { return &Index{views: views} }

// Synced fails, with an error watchmux.IsNotSynced recognises, until the
// mirror holds every namespace and source: the guards answer 503 until then
// rather than decide from an empty mirror.
func (x *Index) Synced() error { return x.read(func(watchmux.Reader) {}) }

// read calls f inside one Read of the mirror.
func (x *Index) read(f func(r watchmux.Reader)) error {
	_, err := x.views.Read(f)
	return err
}

// isServed reports whether resource is served, pending or not.
func isServed(r watchmux.Reader, resource string) bool {
	return slices.Contains(r.Resources(), resource)
}

// Reach answers the guards: how many namespaces' views of resource would
// change if the source namespace/name became obj (nil: deleted).
func (x *Index) Reach(resource, namespace, name string, obj runtime.Object) (int, error) {
	e := watchmux.Edit{Namespace: namespace, Name: name}
	if obj != nil {
		acc, err := meta.Accessor(obj)
		if err != nil {
			return 0, fmt.Errorf("reach of %s %s/%s: %w", resource, namespace, name, err)
		}
		e.Item = &merge.Item{Namespace: namespace, Name: name, Locked: merge.IsLocked(acc.GetAnnotations()), Exceptions: merge.ExceptionRulesOf(acc.GetAnnotations()), Object: obj}
	}
	n := 0
	err := x.read(func(r watchmux.Reader) {
		if !isServed(r, resource) {
			return
		}
		for _, ns := range r.Reached(resource, namespace) {
			before := r.Results(resource, ns, name)
			after := r.ResultsAfter(resource, ns, e)
			if !watchmux.SameView(before, after) {
				n++
			}
		}
	})
	return n, err
}

// Inherited answers the guards: the item of name that namespace's view would
// show if namespace had no object of that name itself.
func (x *Index) Inherited(resource, namespace, name string) (res merge.Result, found bool, err error) {
	err = x.read(func(r watchmux.Reader) {
		if isServed(r, resource) {
			res, found = r.Inherited(resource, namespace, name)
		}
	})
	return res, found, err
}

// Overlays answers the guards: whether an object of resource with
// annotations, created below the inherited item, would be merged onto it as
// an overlay rather than shadow it.
func (x *Index) Overlays(resource string, inherited merge.Result, annotations map[string]string) (overlays bool) {
	_ = x.read(func(r watchmux.Reader) {
		overlays = r.Options(resource).Overlays(inherited, merge.Item{Overlay: merge.WantsOverlay(annotations)})
	})
	return overlays
}

// HasDescendants answers the guards: whether some namespace names namespace
// as its parent.
func (x *Index) HasDescendants(namespace string) (has bool) {
	_ = x.read(func(r watchmux.Reader) { has = len(r.Children(namespace)) > 0 })
	return has
}

// Exists answers the guards.
func (x *Index) Exists(namespace string) (exists bool) {
	_ = x.read(func(r watchmux.Reader) { _, exists = r.Namespace(namespace) })
	return exists
}

// IsTenant answers the guards: whether namespace exists and is a tenant.
func (x *Index) IsTenant(namespace string) (tenant bool) {
	_ = x.read(func(r watchmux.Reader) {
		ns, ok := r.Namespace(namespace)
		tenant = ok && r.Policy().IsTenant(ns)
	})
	return tenant
}

// Terminating answers the guards: whether namespace is being deleted.
func (x *Index) Terminating(namespace string) (terminating bool) {
	_ = x.read(func(r watchmux.Reader) { terminating = r.Terminating(namespace) })
	return terminating
}

// NamespaceUID is the uid of the namespace of that name the mirror holds
// (found: it holds one).
func (x *Index) NamespaceUID(namespace string) (uid types.UID, found bool) {
	_ = x.read(func(r watchmux.Reader) {
		var ns *merge.Namespace
		if ns, found = r.Namespace(namespace); found {
			uid = ns.UID
		}
	})
	return uid, found
}

// SourceLocked answers the guards: whether the source object namespace/name
// of resource is locked, what a request that carries no annotations of its
// own (a scale subresource) is judged by.
func (x *Index) SourceLocked(resource, namespace, name string) (locked bool, err error) {
	err = x.read(func(r watchmux.Reader) {
		it, ok := r.Source(resource, namespace, name)
		locked = ok && it.Locked
	})
	return locked, err
}

// Guarded implements webhookconfig.Guarded: what the match conditions need, and false
// before the sources are read.
func (x *Index) Guarded() (webhookconfig.MatchInputs, bool) {
	g := webhookconfig.MatchInputs{LockedNames: map[string][]string{}}
	err := x.read(func(r watchmux.Reader) {
		for _, res := range r.Resources() {
			if names := r.LockedNames(res); len(names) > 0 {
				g.LockedNames[res] = names
			}
		}
		globals := r.GlobalNamespaces()
		g.Inherited = append(g.Inherited, globals...)
		for _, p := range r.Parents() {
			if !slices.Contains(globals, p) {
				g.Inherited = append(g.Inherited, p)
			}
		}
		sort.Strings(g.Inherited)
		for n := range r.Policy().Excluded {
			if !slices.Contains(globals, n) && n != r.Policy().GlobalNamespace {
				g.NeverInherited = append(g.NeverInherited, n)
			}
		}
		sort.Strings(g.NeverInherited)
	})
	if err != nil {
		return webhookconfig.MatchInputs{}, false
	}
	return g, true
}

// Changed implements webhookconfig.Guarded.
func (x *Index) Changed() <-chan struct{} { return x.views.Changed() }
