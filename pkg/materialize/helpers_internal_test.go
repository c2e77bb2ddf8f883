package materialize

import (
	"fmt"
	"sync"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

func TestMain(m *testing.M) {
	// /metrics registers them in the server's wiring; the tests read them.
	RegisterMetrics(legacyregistry.MustRegister)
	goleak.VerifyTestMain(m)
}

const global = "implicit-global"

var (
	npGVR  = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"}
	npKind = kinds.NetworkPolicies()
)

func policy() merge.Policy {
	return merge.Policy{GlobalNamespace: global, Excluded: map[string]bool{"kube-system": true}}
}

// namespace returns the test Namespace name, a child of parent (whose uid
// it recorded) when parent is set.
func namespace(name, parent string) *corev1.Namespace {
	if parent == "" {
		return testfixture.Namespace(name)
	}
	return testfixture.Namespace(name, testfixture.Parent(parent), testfixture.Recorded)
}

// netpol is a source NetworkPolicy selecting pods with app=<app>.
func netpol(namespace, name, app, rv string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + namespace + "-" + name), ResourceVersion: rv},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
}

// newMux returns a mux of networkpolicies fed with the hierarchy
// implicit-global; org; team-a (child of org); team-b; kube-system
// (excluded), and srcs; synced unless unsynced.
func newMux(unsynced bool, srcs ...*networkingv1.NetworkPolicy) *watchmux.Mux {
	objects := views.NewObjects(map[string]func() runtime.Object{
		"networkpolicies": func() runtime.Object { return &networkingv1.NetworkPolicy{} },
	}, 0)
	m := watchmux.New(policy(), []string{"networkpolicies"}, objects, watchmux.Options{})
	for _, ns := range []*corev1.Namespace{namespace(global, ""), namespace("org", ""), namespace("team-a", "org"), namespace("team-b", ""), namespace("kube-system", "")} {
		m.OnNamespace(ns, false)
	}
	for _, s := range srcs {
		m.OnSource("networkpolicies", s, false)
	}
	if !unsynced {
		m.MarkSynced()
	}
	return m
}

// fakeHost is a fake dynamic client whose create gives the object a uid
// and a resourceVersion, whose update replaces the object, honouring a
// resourceVersion precondition, and whose delete honours uid and
// resourceVersion preconditions; it records the creates and updates that
// succeed, and every delete attempted.
type fakeHost struct {
	*dynamicfake.FakeDynamicClient
	mu     sync.Mutex
	writes []string
	next   int
}

func newFakeHost(t testing.TB, objs ...runtime.Object) *fakeHost {
	t.Helper()
	scheme := runtime.NewScheme()
	h := &fakeHost{FakeDynamicClient: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{npGVR: "NetworkPolicyList"})}
	for _, o := range objs {
		u := toUnstructured(t, o)
		if err := h.Tracker().Create(npGVR, u, u.GetNamespace()); err != nil {
			t.Fatal(err)
		}
	}
	tracker := h.Tracker()
	h.PrependReactor("create", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		u := action.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		if u.GetResourceVersion() != "" {
			return true, nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
		}
		u.SetUID(types.UID(fmt.Sprintf("uid-copy-%d", h.bump())))
		u.SetResourceVersion(fmt.Sprint(h.bump()))
		if err := tracker.Create(npGVR, u, action.GetNamespace()); err != nil {
			return true, nil, err
		}
		h.record("create " + u.GetNamespace() + "/" + u.GetName())
		return true, u, nil
	})
	h.PrependReactor("delete", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		da := action.(clienttesting.DeleteAction)
		h.record("delete " + action.GetNamespace() + "/" + da.GetName())
		pre := da.GetDeleteOptions().Preconditions
		if pre == nil {
			return false, nil, nil
		}
		cur, err := tracker.Get(npGVR, action.GetNamespace(), da.GetName())
		if err != nil {
			return true, nil, err
		}
		c := cur.(*unstructured.Unstructured)
		if (pre.UID != nil && *pre.UID != c.GetUID()) || (pre.ResourceVersion != nil && *pre.ResourceVersion != c.GetResourceVersion()) {
			return true, nil, apierrors.NewConflict(npGVR.GroupResource(), da.GetName(), fmt.Errorf("precondition failed: have uid %s, resourceVersion %s", c.GetUID(), c.GetResourceVersion()))
		}
		return false, nil, nil
	})
	h.PrependReactor("update", "*", func(action clienttesting.Action) (bool, runtime.Object, error) {
		// An update under a resourceVersion precondition, as
		// kube-apiserver makes it.
		u := action.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		cur, err := tracker.Get(npGVR, action.GetNamespace(), u.GetName())
		if err != nil {
			return true, nil, err
		}
		c := cur.(*unstructured.Unstructured)
		if rv := u.GetResourceVersion(); rv != "" && rv != c.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(npGVR.GroupResource(), u.GetName(), fmt.Errorf("resourceVersion %s, have %s", rv, c.GetResourceVersion()))
		}
		u.SetUID(c.GetUID())
		u.SetResourceVersion(fmt.Sprint(h.bump()))
		if err := tracker.Update(npGVR, u, action.GetNamespace()); err != nil {
			return true, nil, err
		}
		h.record("update " + u.GetNamespace() + "/" + u.GetName())
		return true, u, nil
	})
	return h
}

func (h *fakeHost) bump() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	return h.next
}

func (h *fakeHost) record(w string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writes = append(h.writes, w)
}

func (h *fakeHost) takeWrites() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.writes
	h.writes = nil
	return w
}

// objects returns the NetworkPolicies of namespace by name.
func (h *fakeHost) objects(t testing.TB, namespace string) map[string]*unstructured.Unstructured {
	t.Helper()
	list, err := h.Tracker().List(npGVR, npGVR.GroupVersion().WithKind("NetworkPolicy"), namespace)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*unstructured.Unstructured{}
	for _, o := range list.(*unstructured.UnstructuredList).Items {
		out[o.GetName()] = &o
	}
	return out
}

// list is a lister of the copies from the fake host itself, of their Go
// type as the server's informers of the built-in kinds' copies hold them
// (Protobuf).
func (h *fakeHost) list(t testing.TB) lister {
	return func(_ kinds.Kind, namespace string) ([]metav1.Object, error) {
		var out []metav1.Object
		sel := labels.SelectorFromSet(labels.Set{v1alpha1.LabelMaterialized: "true"})
		for _, o := range h.objects(t, namespace) {
			if sel.Matches(labels.Set(o.GetLabels())) {
				np := &networkingv1.NetworkPolicy{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, np); err != nil {
					t.Fatal(err)
				}
				out = append(out, np)
			}
		}
		return out, nil
	}
}

func toUnstructured(t testing.TB, o runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("networking.k8s.io/v1")
	u.SetKind("NetworkPolicy")
	return u
}

// tenantObject is a NetworkPolicy of a tenant's own, without the label.
func tenantObject(namespace, name string) *networkingv1.NetworkPolicy {
	return netpol(namespace, name, "tenant", "1")
}

// staleCopy is a copy as the server wrote it earlier, of source
// namespace/name at rv, selecting app.
func staleCopy(namespace, srcNS, name, app, rv string) *networkingv1.NetworkPolicy {
	np := netpol(namespace, name, app, "5")
	np.UID = types.UID("uid-copy-" + namespace + "-" + name)
	np.Labels = map[string]string{v1alpha1.LabelMaterialized: "true", v1alpha1.LabelScope: "global", v1alpha1.LabelSourceNamespace: srcNS}
	np.Annotations = map[string]string{v1alpha1.AnnotationSourceUID: "uid-" + srcNS + "-" + name, v1alpha1.AnnotationSourceResourceVersion: rv}
	return np
}
