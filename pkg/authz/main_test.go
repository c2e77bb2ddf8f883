package authz_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// TestMain fails the package if any test or benchmark leaves a goroutine
// behind: every ClusterRole informer must stop with its test.
func TestMain(m *testing.M) {
	// /metrics registers them in the server's wiring; the tests read them.
	authz.RegisterMetrics(legacyregistry.MustRegister)
	goleak.VerifyTestMain(m)
}

const (
	global       = "implicit-global"
	rolebindings = "rolebindings"
	roles        = "roles"
)

// policy is the default tenant policy of DESIGN.md.
func policy() merge.Policy {
	return merge.Policy{
		GlobalNamespace: global,
		Excluded:        map[string]bool{"kube-system": true, "kube-public": true, "kube-node-lease": true},
	}
}

// newUnsyncedMux returns a mux of the two resources the authorizer reads,
// building view items as the server does.
func newUnsyncedMux() *watchmux.Mux {
	objects := views.NewObjects(map[string]func() runtime.Object{
		rolebindings: func() runtime.Object { return &rbacv1.RoleBinding{} },
		roles:        func() runtime.Object { return &rbacv1.Role{} },
	}, 0)
	return watchmux.New(policy(), []string{rolebindings, roles}, objects, watchmux.Options{})
}

// apply feeds objs to m as the informers would: namespaces, RoleBindings and
// Roles, each a new object (the mux tells changes apart by identity).
func apply(m *watchmux.Mux, deleted bool, objs ...runtime.Object) {
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Namespace:
			m.OnNamespace(o, deleted)
		case *rbacv1.RoleBinding:
			m.OnSource(rolebindings, o, deleted)
		case *rbacv1.Role:
			m.OnSource(roles, o, deleted)
		default:
			panic(fmt.Sprintf("apply: unexpected %T", o))
		}
	}
}

// Namespace builders, shared with the other packages' tests.
type nsOpt = testfixture.NamespaceOpt

var (
	parent    = testfixture.Parent
	exclude   = testfixture.Exclude
	noInherit = testfixture.NoInherit
	namespace = testfixture.Namespace
)

// sourceRV numbers the test source objects' versions, as etcd would.
var sourceRV atomic.Uint64

// objOpt decorates a test source object; locked is internal/testfixture's.
type objOpt = testfixture.ObjectOpt

var locked = testfixture.Locked

func label(k, v string) objOpt {
	return func(m *metav1.ObjectMeta) { m.Labels[k] = v }
}

func sourceMeta(namespace, name string, opts ...objOpt) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Namespace:       namespace,
		Name:            name,
		UID:             types.UID("uid-" + namespace + "-" + name),
		ResourceVersion: strconv.FormatUint(sourceRV.Add(1), 10),
		Labels:          map[string]string{},
		Annotations:     map[string]string{},
	}
	for _, o := range opts {
		o(&m)
	}
	return m
}

func clusterRoleRef(name string) rbacv1.RoleRef {
	return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
}

func roleRef(name string) rbacv1.RoleRef {
	return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}
}

func user(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
}

// sa is a ServiceAccount subject; namespace "" means the namespace the
// binding applies in.
func sa(namespace, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}
}

// roleBinding returns a new RoleBinding object, with a new resourceVersion.
func roleBinding(namespace, name string, ref rbacv1.RoleRef, subjects []rbacv1.Subject, opts ...objOpt) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: sourceMeta(namespace, name, opts...), RoleRef: ref, Subjects: subjects}
}

// role returns a new Role object, with a new resourceVersion.
func role(namespace, name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{ObjectMeta: sourceMeta(namespace, name), Rules: rules}
}

// clusterRole returns a new ClusterRole object with a new resourceVersion
// (the fake clientset keeps the one it is given, as etcd would not).
func clusterRole(name string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{
		Name:            name,
		UID:             types.UID("uid-" + name),
		ResourceVersion: strconv.FormatUint(sourceRV.Add(1), 10),
	}, Rules: rules}
}

// rule is a resource rule: comma-separated verbs, API groups ("" is the
// core group) and resources.
func rule(verbs, apiGroups, resources string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{
		Verbs:     strings.Split(verbs, ","),
		APIGroups: strings.Split(apiGroups, ","),
		Resources: strings.Split(resources, ","),
	}
}

// countingViews is the mux, counting the Read calls: a decision answered
// from the cache reads nothing.
type countingViews struct {
	*watchmux.Mux
	reads atomic.Int64
}

var _ authz.Views = &countingViews{}

// Read implements authz.Views.
func (c *countingViews) Read(f func(watchmux.Reader)) (string, error) {
	c.reads.Add(1)
	return c.Mux.Read(f)
}

// fixture is an authorizer over a mux the test feeds and a ClusterRole
// informer over a fake clientset.
type fixture struct {
	mux    *watchmux.Mux
	views  *countingViews
	client *fake.Clientset
	// informer is the ClusterRole informer.
	informer cache.SharedIndexInformer
	authz    *authz.Authorizer
}

// fixtureOptions tune newFixture.
type fixtureOptions struct {
	clusterRoles        []*rbacv1.ClusterRole
	clusterRoleBindings []*rbacv1.ClusterRoleBinding
	// unsynced leaves the mux unsynced.
	unsynced bool
	// cacheSize of the authorizer (default if 0).
	cacheSize int
	// resync is the ClusterRole informer's resync period (none if 0).
	resync time.Duration
}

// newFixture returns an authorizer over a mux fed with objs and synced, and
// a started and synced ClusterRole informer holding opts.clusterRoles. The
// informer stops when the test ends.
func newFixture(tb testing.TB, opts fixtureOptions, objs ...runtime.Object) *fixture {
	tb.Helper()
	m := newUnsyncedMux()
	apply(m, false, objs...)
	if !opts.unsynced {
		m.MarkSynced()
	}
	crs := make([]runtime.Object, 0, len(opts.clusterRoles))
	for _, cr := range opts.clusterRoles {
		crs = append(crs, cr)
	}
	for _, crb := range opts.clusterRoleBindings {
		crs = append(crs, crb)
	}
	client := fake.NewClientset(crs...)
	factory := informers.NewSharedInformerFactory(client, opts.resync)
	informer := factory.Rbac().V1().ClusterRoles().Informer()
	bindings := factory.Rbac().V1().ClusterRoleBindings().Informer()
	v := &countingViews{Mux: m}
	a, err := authz.New(v, informer, bindings, opts.cacheSize)
	if err != nil {
		tb.Fatalf("authz.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced, bindings.HasSynced) {
		tb.Fatal("the ClusterRole informers did not sync")
	}
	return &fixture{mux: m, views: v, client: client, informer: informer, authz: a}
}

// authorize decides attrs, failing the test on an error.
func (f *fixture) authorize(tb testing.TB, attrs authz.Attributes) authz.Decision {
	tb.Helper()
	d, err := f.authz.Authorize(attrs)
	if err != nil {
		tb.Fatalf("Authorize(%+v): %v", attrs, err)
	}
	return d
}

// eventually polls until attrs is decided allowed == want: a ClusterRole
// change reaches the authorizer through the informer, asynchronously.
func (f *fixture) eventually(t *testing.T, attrs authz.Attributes, want bool) {
	t.Helper()
	testwait.Within(t, 5*time.Millisecond, testwait.Timeout, fmt.Sprintf("Authorize(%+v) to be allowed %v", attrs, want), func(context.Context) error {
		if got := f.authorize(t, attrs); got.Allowed != want {
			return fmt.Errorf("Authorize = %+v", got)
		}
		return nil
	})
}

// updateClusterRole replaces a ClusterRole through the fake clientset.
func (f *fixture) updateClusterRole(t *testing.T, cr *rbacv1.ClusterRole) {
	t.Helper()
	if _, err := f.client.RbacV1().ClusterRoles().Update(context.Background(), cr, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("updating ClusterRole %s: %v", cr.Name, err)
	}
}

// podReader asks to get pods in namespace, as user in groups.
func podReader(user string, groups []string, namespace string) authz.Attributes {
	return authz.Attributes{User: user, Groups: groups, Namespace: namespace, Verb: "get", Resource: "pods", Name: "web"}
}

// with returns a with verb.
func with(a authz.Attributes, verb string) authz.Attributes {
	a.Verb = verb
	return a
}
