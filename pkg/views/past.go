package views

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// pastMux is a Mux that merges its views as of a past version: a
// *watchmux.Mux.
type pastMux interface {
	ResultsAt(ctx context.Context, version, resource, namespace, name string) ([]watchmux.NamespaceResults, error)
}

var _ registry.PastLister = &View{}

// ListAt returns the view items of namespace (every namespace's for ""),
// of name only when set, as of version, stamped with it: an exact list of a
// past version (see watchmux.Mux.ResultsAt). It implements
// registry.PastLister.
func (v *View) ListAt(ctx context.Context, namespace, name, version string) ([]runtime.Object, error) {
	pm, ok := v.mux.(pastMux)
	if !ok {
		return nil, apierrors.NewResourceExpired("too old resource version: " + version)
	}
	all, err := pm.ResultsAt(ctx, version, v.resource.Resource, namespace, name)
	if err != nil {
		return nil, v.readError(err)
	}
	var out []runtime.Object
	for _, nr := range all {
		for _, r := range nr.Results {
			obj, err := item(nr.Namespace, r, version, v.stale, v.kind)
			if err != nil {
				return nil, err
			}
			out = append(out, obj)
		}
	}
	return out, nil
}

// reachMux is a Mux that catches up with a version another replica
// issued: a *watchmux.Mux.
type reachMux interface {
	ReachVersion(ctx context.Context, version string) (current string, same bool, err error)
}

var (
	_ registry.VersionReacher = &View{}
	_ registry.ChangeNotifier = &View{}
)

// changeMux is a Mux that says when its views change: a *watchmux.Mux.
type changeMux interface {
	NextChange() <-chan struct{}
}

// NextChange implements registry.ChangeNotifier; nil (never) for a mux
// that can't say.
func (v *View) NextChange() <-chan struct{} {
	if cm, ok := v.mux.(changeMux); ok {
		return cm.NextChange()
	}
	return nil
}

// ReachVersion brings the view to version, ahead of its own, as a watch
// from it is (see watchmux.Mux.ReachVersion). It implements
// registry.VersionReacher.
func (v *View) ReachVersion(ctx context.Context, version string) (string, bool, error) {
	rm, ok := v.mux.(reachMux)
	if !ok {
		return "", false, registry.ErrCannotReach
	}
	current, same, err := rm.ReachVersion(ctx, version)
	if err != nil {
		return "", false, v.readError(err)
	}
	return current, same, nil
}

var _ registry.NamespaceIdentifier = &View{}

// NamespaceUID is the uid of the namespace of that name in the mirror, ""
// when there is none or the mux is not synced. It implements
// registry.NamespaceIdentifier: a continuation of a list of a namespace
// deleted and created again since reads no page kept of the old one.
func (v *View) NamespaceUID(namespace string) types.UID {
	var uid types.UID
	_, _ = v.mux.Read(func(r watchmux.Reader) {
		if ns, ok := r.Namespace(namespace); ok {
			uid = ns.UID
		}
	})
	return uid
}
