package watchmux_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// TestMain fails the package if any test or benchmark leaves a goroutine
// behind: every watcher's goroutines must end with Stop, its context or Run's.
func TestMain(m *testing.M) {
	// /metrics registers them in the server's wiring; the tests read them.
	watchmux.RegisterMetrics(legacyregistry.MustRegister)
	goleak.VerifyTestMain(m)
}

const (
	global       = "implicit-global"
	rolebindings = "rolebindings"
	roles        = "roles"
	// waitTimeout bounds every wait for watch events; generous for -race on 2 cores.
	waitTimeout = 20 * time.Second
)

// policy is the default tenant policy of DESIGN.md.
func policy() merge.Policy {
	return merge.Policy{
		GlobalNamespace: global,
		Excluded:        map[string]bool{"kube-system": true, "kube-public": true, "kube-node-lease": true},
	}
}

// objects is the watchmux.Objects of these tests. It builds view items as
// pkg/views does (a copy of the winning source in the viewing namespace,
// with provenance labels and annotations) without depending on it, so these
// tests don't move with pkg/views.
type objects struct{}

var _ watchmux.Objects = &objects{}

// Item implements watchmux.Objects.
func (o *objects) Item(_, namespace string, r merge.Result, rv string) (runtime.Object, error) {
	src, ok := r.Item.Object.(runtime.Object)
	if !ok {
		return nil, fmt.Errorf("source %s/%s is a %T", r.Item.Namespace, r.Item.Name, r.Item.Object)
	}
	obj := src.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	sourceUID, sourceRV := m.GetUID(), m.GetResourceVersion()
	if r.Item.FromCandidate != "" {
		m.SetName(r.Item.Name)
		sourceUID = r.Item.UID
	}
	m.SetNamespace(namespace)
	m.SetUID(types.UID(string(sourceUID) + "/" + namespace))
	m.SetResourceVersion(rv)
	lbls := map[string]string{}
	for k, v := range m.GetLabels() {
		lbls[k] = v
	}
	lbls[v1alpha1.LabelScope] = string(r.Scope)
	lbls[v1alpha1.LabelSourceNamespace] = r.Item.Namespace
	m.SetLabels(lbls)
	ann := map[string]string{}
	for k, v := range m.GetAnnotations() {
		ann[k] = v
	}
	ann[v1alpha1.AnnotationSourceUID] = string(sourceUID)
	ann[v1alpha1.AnnotationSourceResourceVersion] = sourceRV
	delete(ann, v1alpha1.AnnotationConflict)
	if len(r.Conflicts) > 0 {
		ann[v1alpha1.AnnotationConflict] = r.Conflict()
	}
	delete(ann, v1alpha1.AnnotationCandidate)
	if c := r.Candidates(); c != "" {
		ann[v1alpha1.AnnotationCandidate] = c
	}
	m.SetAnnotations(ann)
	return obj, nil
}

// Empty implements watchmux.Objects.
func (o *objects) Empty(resource string) runtime.Object {
	if resource == roles {
		return &rbacv1.Role{}
	}
	return &rbacv1.RoleBinding{}
}

// newMux returns an unsynced mux serving resources (RoleBindings when none
// are given) with the test policy.
func newMux(opts watchmux.Options, resources ...string) *watchmux.Mux {
	if len(resources) == 0 {
		resources = []string{rolebindings}
	}
	return watchmux.New(policy(), resources, &objects{}, opts)
}

// Namespace builders, shared with the other packages' tests.
type nsOpt = testfixture.NamespaceOpt

var (
	parent    = testfixture.Parent
	exclude   = testfixture.Exclude
	noInherit = testfixture.NoInherit
	namespace = testfixture.Namespace
	parentUID = testfixture.ParentUID
)

// objOpt decorates a test source object; locked and sourceMeta are
// internal/testfixture's (every source object gets a new resourceVersion).
type objOpt = testfixture.ObjectOpt

var (
	locked     = testfixture.Locked
	sourceMeta = testfixture.SourceMeta
	nextRV     = testfixture.NextResourceVersion
)

// roleBinding returns the test RoleBinding namespace/name, with a new
// resourceVersion.
func roleBinding(namespace, name string, opts ...objOpt) *rbacv1.RoleBinding {
	return testfixture.RoleBinding(sourceMeta(namespace, name, opts...))
}

// role returns the test Role namespace/name, with a new resourceVersion.
func role(namespace, name string, opts ...objOpt) *rbacv1.Role {
	return testfixture.Role(sourceMeta(namespace, name, opts...))
}

// step is one change fed to a mux, as an informer handler would.
type step func(m *watchmux.Mux)

func addNS(ns *corev1.Namespace) step { return func(m *watchmux.Mux) { m.OnNamespace(ns, false) } }
func delNS(name string) step {
	return func(m *watchmux.Mux) { m.OnNamespace(namespace(name), true) }
}
func put(resource string, obj runtime.Object) step {
	return func(m *watchmux.Mux) { m.OnSource(resource, obj, false) }
}
func del(resource string, obj runtime.Object) step {
	return func(m *watchmux.Mux) { m.OnSource(resource, obj, true) }
}
func putRB(namespace, name string, opts ...objOpt) step {
	return put(rolebindings, roleBinding(namespace, name, opts...))
}
func delRB(namespace, name string) step { return del(rolebindings, roleBinding(namespace, name)) }

// currentRV is the resourceVersion m's state is at.
func currentRV(t testing.TB, m *watchmux.Mux) uint64 {
	t.Helper()
	rv, err := m.Read(func(watchmux.Reader) {})
	if err != nil {
		t.Fatalf("reading the mux: %v", err)
	}
	return parseRV(t, rv)
}

// parseRV parses a resourceVersion, failing unless it is one, and returns
// the sequence number it carries for the instance that issued it: the
// tests order versions of one instance by it. rvText prints it back.
func parseRV(t testing.TB, rv string) uint64 {
	t.Helper()
	v, err := resourceversion.Parse(rv)
	if err != nil || v.Seq == 0 {
		t.Fatalf("resourceVersion %q is not a version with a sequence number: %v", rv, err)
	}
	texts.Store(v.Seq, rv)
	return v.Seq
}

// texts maps the sequence numbers parseRV has seen to their versions.
var texts sync.Map

// rvText is the version parseRV saw with sequence number seq; one it has
// not seen is printed as a decimal, which is not a version of the mux.
func rvText(seq uint64) string {
	if s, ok := texts.Load(seq); ok {
		return s.(string)
	}
	return strconv.FormatUint(seq, 10)
}

// rvOf is the resourceVersion of a watch event's object.
func rvOf(t testing.TB, ev watch.Event) uint64 {
	t.Helper()
	acc, err := meta.Accessor(ev.Object)
	if err != nil {
		t.Fatalf("%s event without metadata: %v", ev.Type, err)
	}
	return parseRV(t, acc.GetResourceVersion())
}

// describe renders a view item for comparisons: its key, where it comes
// from and whether a lock blocked something.
func describe(obj runtime.Object) string {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Sprintf("<%T without metadata>", obj)
	}
	s := fmt.Sprintf("%s/%s %s@%s", acc.GetNamespace(), acc.GetName(),
		acc.GetLabels()[v1alpha1.LabelScope], acc.GetLabels()[v1alpha1.LabelSourceNamespace])
	if acc.GetAnnotations()[v1alpha1.AnnotationConflict] != "" {
		s += " conflict"
	}
	return s
}

// describeEvent renders a watch event as "TYPE namespace/name scope@source [conflict]".
func describeEvent(ev watch.Event) string { return string(ev.Type) + " " + describe(ev.Object) }

// describeEvents renders events, sorted: the events of one change reach the
// namespaces in no particular order.
func describeEvents(evs []watch.Event) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, describeEvent(ev))
	}
	sort.Strings(out)
	return out
}

// follower records what one watch delivers, from a goroutine of its own.
type follower struct {
	w      watch.Interface
	mu     sync.Mutex
	events []watch.Event
	closed chan struct{}
}

// follow starts recording w's events; the test's cleanup stops w and waits
// for the recording goroutine.
func follow(t testing.TB, w watch.Interface) *follower {
	f := &follower{w: w, closed: make(chan struct{})}
	go func() {
		defer close(f.closed)
		for ev := range w.ResultChan() {
			f.mu.Lock()
			f.events = append(f.events, ev)
			f.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		w.Stop()
		<-f.closed
	})
	return f
}

// watchAndFollow starts a watch of m and follows it.
func watchAndFollow(t testing.TB, m *watchmux.Mux, opts watchmux.WatchOptions) *follower {
	t.Helper()
	if opts.Resource == "" {
		opts.Resource = rolebindings
	}
	w, err := m.Watch(t.Context(), opts)
	if err != nil {
		t.Fatalf("watching %+v: %v", opts, err)
	}
	return follow(t, w)
}

// received returns a copy of the events received so far.
func (f *follower) received() []watch.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]watch.Event(nil), f.events...)
}

// waitFor returns the first n events, failing the test if they don't come.
func (f *follower) waitFor(t testing.TB, n int) []watch.Event {
	t.Helper()
	var evs []watch.Event
	testwait.Within(t, testwait.Interval, waitTimeout, fmt.Sprintf("%d events", n), func(context.Context) error {
		evs = f.received()
		if len(evs) >= n {
			return nil
		}
		select {
		case <-f.closed:
			t.Fatalf("watch closed after %d events, want %d: %v", len(evs), n, describeEvents(evs))
		default:
		}
		return fmt.Errorf("got %d: %v", len(evs), describeEvents(evs))
	})
	return evs[:n]
}

// waitClosed fails the test unless the watch's result channel closes.
func (f *follower) waitClosed(t testing.TB) {
	t.Helper()
	select {
	case <-f.closed:
	case <-time.After(waitTimeout):
		t.Fatalf("watch still open after %v", waitTimeout)
	}
}

// isClosed reports whether the watch's result channel has closed.
func (f *follower) isClosed() bool {
	select {
	case <-f.closed:
		return true
	default:
		return false
	}
}

// readViews returns every namespace's view of resource, as described items
// keyed by namespace/name, and the version they are at.
func readViews(t testing.TB, m *watchmux.Mux, resource string) (map[string]string, uint64) {
	t.Helper()
	out := map[string]string{}
	obj := &objects{}
	var results []struct {
		ns string
		r  merge.Result
	}
	rv, err := m.Read(func(r watchmux.Reader) {
		for _, ns := range r.Namespaces() {
			for _, res := range r.Results(resource, ns, "") {
				results = append(results, struct {
					ns string
					r  merge.Result
				}{ns, res})
			}
		}
	})
	if err != nil {
		t.Fatalf("reading the mux: %v", err)
	}
	for _, x := range results {
		o, err := obj.Item(resource, x.ns, x.r, "1")
		if err != nil {
			t.Fatalf("building %s/%s: %v", x.ns, x.r.Item.Name, err)
		}
		out[x.ns+"/"+x.r.Item.Name] = describeFull(o)
	}
	return out, parseRV(t, rv)
}

// describeFull renders everything a view item's provenance says, to tell
// any two versions of an item apart.
func describeFull(obj runtime.Object) string {
	acc, _ := meta.Accessor(obj)
	a := acc.GetAnnotations()
	return strings.Join([]string{describe(obj), acc.GetName(), string(acc.GetUID()), a[v1alpha1.AnnotationSourceUID], a[v1alpha1.AnnotationSourceResourceVersion], a[v1alpha1.AnnotationConflict], a[v1alpha1.AnnotationCandidate]}, " | ")
}
