package views_test

import (
	"fmt"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// TestMain fails the package if any test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	global = "implicit-global"
	group  = "implicit.dev"
)

var (
	rolebindings    = schema.GroupResource{Group: group, Resource: "rolebindings"}
	roles           = schema.GroupResource{Group: group, Resource: "roles"}
	networkpolicies = schema.GroupResource{Group: group, Resource: "networkpolicies"}
)

// policy is the default tenant policy of DESIGN.md.
func policy() merge.Policy {
	return merge.Policy{
		GlobalNamespace: global,
		Excluded:        map[string]bool{"kube-system": true, "kube-public": true, "kube-node-lease": true},
	}
}

// served are the resources of the test mux, in configuration order.
var served = []string{rolebindings.Resource, roles.Resource, networkpolicies.Resource}

// newObject returns an empty object of each served resource.
func newObject() map[string]func() runtime.Object {
	return map[string]func() runtime.Object{
		rolebindings.Resource:    func() runtime.Object { return &rbacv1.RoleBinding{} },
		roles.Resource:           func() runtime.Object { return &rbacv1.Role{} },
		networkpolicies.Resource: func() runtime.Object { return &networkingv1.NetworkPolicy{} },
	}
}

// objects builds the view objects of the served resources' watch events.
func objects() *views.Objects { return views.NewObjects(newObject(), 0) }

// newUnsyncedMux returns a mux fed with namespaces and with objs as source
// objects of resource, as the informers would before they sync.
func newUnsyncedMux(resource string, namespaces []*corev1.Namespace, objs ...runtime.Object) *watchmux.Mux {
	m := watchmux.New(policy(), served, objects(), watchmux.Options{})
	for _, ns := range namespaces {
		m.OnNamespace(ns, false)
	}
	for _, o := range objs {
		m.OnSource(resource, o, false)
	}
	return m
}

// newMux returns a synced mux fed with namespaces and with objs as source
// objects of resource.
func newMux(resource string, namespaces []*corev1.Namespace, objs ...runtime.Object) *watchmux.Mux {
	m := newUnsyncedMux(resource, namespaces, objs...)
	m.MarkSynced()
	return m
}

// newView returns the view of resource read from a synced mux fed with
// namespaces and objs, and the mux.
func newView(resource schema.GroupResource, namespaces []*corev1.Namespace, objs ...runtime.Object) (*views.View, *watchmux.Mux) {
	m := newMux(resource.Resource, namespaces, objs...)
	return views.New(resource, m), m
}

// currentRV is the resourceVersion m's state is at.
func currentRV(t *testing.T, m *watchmux.Mux) string {
	t.Helper()
	rv, err := m.Read(func(watchmux.Reader) {})
	if err != nil {
		t.Fatalf("reading the mux: %v", err)
	}
	return rv
}

// parseRV parses a resourceVersion, failing unless it is one, and returns
// the sequence number it carries for the instance that issued it, which
// orders one instance's versions.
func parseRV(t *testing.T, rv string) uint64 {
	t.Helper()
	v, err := resourceversion.Parse(rv)
	if err != nil || v.Seq == 0 {
		t.Fatalf("resourceVersion %q is not a version with a sequence number: %v", rv, err)
	}
	return v.Seq
}

// Namespace builders, shared with the other packages' tests.
type nsOpt = testfixture.NamespaceOpt

var (
	parent    = testfixture.Parent
	exclude   = testfixture.Exclude
	noInherit = testfixture.NoInherit
	namespace = testfixture.Namespace
)

// objOpt decorates a test source object, as in the other packages' tests.
type objOpt = testfixture.ObjectOpt

func locked(m *metav1.ObjectMeta) {
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[v1alpha1.AnnotationLocked] = "true"
}

func sourceMeta(namespace, name string, opts ...objOpt) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Namespace:       namespace,
		Name:            name,
		UID:             sourceUID(namespace, name),
		ResourceVersion: "7",
	}
	for _, o := range opts {
		o(&m)
	}
	return m
}

// sourceUID is the uid of the test source object namespace/name.
func sourceUID(namespace, name string) types.UID {
	return types.UID("uid-" + namespace + "-" + name)
}

// roleBinding returns the test RoleBinding namespace/name.
func roleBinding(namespace, name string, opts ...objOpt) *rbacv1.RoleBinding {
	return testfixture.RoleBinding(sourceMeta(namespace, name, opts...))
}

// role returns the test Role namespace/name.
func role(namespace, name string, opts ...objOpt) *rbacv1.Role {
	return testfixture.Role(sourceMeta(namespace, name, opts...))
}

func networkPolicy(namespace, name string, opts ...objOpt) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: sourceMeta(namespace, name, opts...),
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
}

// summary renders a view item as "name scope source-namespace", the
// provenance merging decides.
func summary(t *testing.T, obj runtime.Object) string {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatalf("view item %T: %v", obj, err)
	}
	return fmt.Sprintf("%s %s %s", m.GetName(), m.GetLabels()[v1alpha1.LabelScope], m.GetLabels()[v1alpha1.LabelSourceNamespace])
}

func summaries(t *testing.T, objs []runtime.Object) []string {
	t.Helper()
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, summary(t, o))
	}
	return out
}

// snapshot deep-copies objs, to check later that nothing mutated them.
func snapshot(objs []runtime.Object) []runtime.Object {
	out := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.DeepCopyObject())
	}
	return out
}
