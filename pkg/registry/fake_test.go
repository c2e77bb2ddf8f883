package registry_test

import (
	"context"
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
)

const (
	group = "implicit.dev"
	// fakeRV is the resourceVersion the fake viewer's lists are current at.
	fakeRV = "f7.v4711"
)

// fakeViewer serves fixed view items and records what it was asked.
type fakeViewer struct {
	resource schema.GroupResource
	items    []runtime.Object
	// err, when set, is returned by every call.
	err error
	// watcher is what Watch returns.
	watcher *watch.FakeWatcher
	// rv, when set, is the version lists are current at (default fakeRV).
	rv string

	mu      sync.Mutex
	gets    []string // "namespace/name"
	lists   []string // namespaces
	watches []watchCall
}

// watchCall is one call of Watch.
type watchCall struct {
	namespace string
	req       registry.WatchRequest
}

var _ registry.Viewer = &fakeViewer{}

func newFakeViewer(resource string, items ...runtime.Object) *fakeViewer {
	return &fakeViewer{resource: schema.GroupResource{Group: group, Resource: resource}, items: items, watcher: watch.NewFake()}
}

// Get implements registry.Viewer.
func (f *fakeViewer) Get(_ context.Context, namespace, name string) (runtime.Object, error) {
	f.mu.Lock()
	f.gets = append(f.gets, namespace+"/"+name)
	f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	for _, it := range f.items {
		m, _ := meta.Accessor(it)
		if m.GetNamespace() == namespace && m.GetName() == name {
			return it.DeepCopyObject(), nil
		}
	}
	return nil, apierrors.NewNotFound(f.resource, name)
}

// List implements registry.Viewer.
func (f *fakeViewer) List(_ context.Context, namespace string) ([]runtime.Object, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists = append(f.lists, namespace)
	if f.err != nil {
		return nil, "", f.err
	}
	var out []runtime.Object
	for _, it := range f.items {
		if m, _ := meta.Accessor(it); namespace == "" || m.GetNamespace() == namespace {
			out = append(out, it.DeepCopyObject())
		}
	}
	rv := f.rv
	if rv == "" {
		rv = fakeRV
	}
	return out, rv, nil
}

// change replaces the items and the version lists are current at.
func (f *fakeViewer) change(rv string, items ...runtime.Object) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rv, f.items = rv, items
}

// Watch implements registry.Viewer.
func (f *fakeViewer) Watch(_ context.Context, namespace string, req registry.WatchRequest) (watch.Interface, error) {
	f.mu.Lock()
	f.watches = append(f.watches, watchCall{namespace: namespace, req: req})
	f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return f.watcher, nil
}

func (f *fakeViewer) calls() (gets, lists []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.gets...), append([]string(nil), f.lists...)
}

func (f *fakeViewer) watchCalls() []watchCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]watchCall(nil), f.watches...)
}

// viewMeta is the metadata of a view item in namespace, from a source in sourceNS.
func viewMeta(namespace, name string, scope merge.Scope, sourceNS string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace: namespace,
		Name:      name,
		Labels: map[string]string{
			v1alpha1.LabelScope:           string(scope),
			v1alpha1.LabelSourceNamespace: sourceNS,
			"team":                        namespace,
		},
	}
}

func viewRoleBinding(namespace, name string, scope merge.Scope, sourceNS string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: viewMeta(namespace, name, scope, sourceNS),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
	}
}

// keys renders objects as "namespace/name".
func keys(objs []runtime.Object) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		m, _ := meta.Accessor(o)
		out = append(out, m.GetNamespace()+"/"+m.GetName())
	}
	return out
}
