package offline

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// Item is one item of a namespace's view.
type Item struct {
	Name            string
	Scope           merge.Scope
	SourceNamespace string
	// Conflict is the item's implicit.dev/conflict: what a lock blocked.
	Conflict string
	// Object is the view item as the server serves it (its uid and
	// resourceVersions are the offline stand-ins); nil from Members.
	Object *unstructured.Unstructured
}

// View returns namespace's view of resource, sorted by name: the mirror's
// merge results (watchmux.Reader.Results, pkg/merge's View) rendered by
// pkg/views as the server renders them. A namespace that does not exist has
// an empty view.
func (w *World) View(namespace, resource string) ([]Item, error) {
	return w.view(namespace, resource, true)
}

// Members returns namespace's view of resource as View does, without the
// objects: what tests check, with no rendering.
func (w *World) Members(namespace, resource string) ([]Item, error) {
	return w.view(namespace, resource, false)
}

func (w *World) view(namespace, resource string, render bool) ([]Item, error) {
	k, ok := w.KindOf(resource)
	if !ok {
		return nil, fmt.Errorf("resource %q is not served (served: %v)", resource, w.resources())
	}
	var results []merge.Result
	rv, err := w.mux.Read(func(r watchmux.Reader) { results = r.Results(resource, namespace, "") })
	if err != nil {
		return nil, err
	}
	out := make([]Item, 0, len(results))
	for _, res := range results {
		it := Item{Name: res.Item.Name, Scope: res.Scope, SourceNamespace: res.Item.Namespace, Conflict: res.Conflict()}
		if !render {
			out = append(out, it)
			continue
		}
		obj, err := w.objects.Item(resource, namespace, res, rv)
		if err != nil {
			return nil, err
		}
		u, err := toUnstructured(obj)
		if err != nil {
			return nil, err
		}
		if u.GetKind() == "" {
			u.SetAPIVersion(v1alpha1.SchemeGroupVersion.String())
			u.SetKind(k.Kind)
		}
		it.Object = u
		out = append(out, it)
	}
	return out, nil
}

// Problem returns the hierarchy problem of namespace, if any: a cycle, a
// missing or invalid parent, a depth exceeded.
func (w *World) Problem(namespace string) *merge.Problem {
	var p *merge.Problem
	_, _ = w.mux.Read(func(r watchmux.Reader) { p = r.Lineage(namespace).Problem })
	return p
}

// Reached returns how many namespaces' views of resource an edit of a
// source in namespace may change.
func (w *World) Reached(resource, namespace string) int {
	var n int
	_, _ = w.mux.Read(func(r watchmux.Reader) { n = len(r.Reached(resource, namespace)) })
	return n
}

func (w *World) resources() []string {
	out := make([]string, 0, len(w.kinds))
	for _, k := range w.kinds {
		out = append(out, k.Resource())
	}
	return out
}

// toUnstructured unwraps and converts a view object.
func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.DeepCopy(), nil
	}
	if w, ok := obj.(interface{ GetObject() runtime.Object }); ok {
		obj = w.GetObject()
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}
