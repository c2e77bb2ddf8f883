package watchmux_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// pastSources are a namespace and RoleBindings as kube-apiserver holds
// them: team-x/a at revision 3, team-x/b created at 100; any revision
// lists (none is compacted).
type pastSources struct {
	namespaces []runtime.Object
	bindings   []*rbacv1.RoleBinding
}

func newPastSources() *pastSources {
	ns := func(name string, rev int) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: strconv.Itoa(rev)}}
	}
	rb := func(name string, rev int) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-x", Name: name, UID: types.UID("uid-" + name), ResourceVersion: strconv.Itoa(rev)},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
		}
	}
	return &pastSources{
		namespaces: []runtime.Object{ns("implicit-global", 1), ns("team-x", 2)},
		bindings:   []*rbacv1.RoleBinding{rb("a", 3), rb("b", 100)},
	}
}

func (s *pastSources) listNamespaces(_ context.Context, _, _ string) ([]runtime.Object, error) {
	var out []runtime.Object
	for _, o := range s.namespaces {
		out = append(out, o.DeepCopyObject())
	}
	return out, nil
}

func (s *pastSources) listBindings(_ context.Context, at, namespace string) ([]runtime.Object, error) {
	r, err := strconv.Atoi(at)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	var out []runtime.Object
	for _, b := range s.bindings {
		if rev, _ := strconv.Atoi(b.ResourceVersion); rev <= r && (namespace == "" || b.Namespace == namespace) {
			out = append(out, b.DeepCopy())
		}
	}
	return out, nil
}

// pastStateCounts reads implicit_watch_past_states_total by result.
func pastStateCounts(t *testing.T) map[string]float64 {
	t.Helper()
	got, err := testutil.GetCounterValuesFromGatherer(legacyregistry.DefaultGatherer, "implicit_watch_past_states_total", nil, "result")
	if err != nil {
		return map[string]float64{}
	}
	return got
}

// TestPastStateTurns is issue 38's case 8 as wired: one user making up
// distinct versions, each a past state kube-apiserver must list, is held
// to the fair queue's burst and rate (429 beyond, counted as refused),
// while another user's made-up version is served within a round; and the
// first user's ordinary resumes (the current state, a version a catch-up
// finds equal to it, a past state the caches hold) never wait, even with
// its turns used up. Not parallel: it reads the package's metrics.
func TestPastStateTurns(t *testing.T) {
	src := newPastSources()
	fake := clocktesting.NewFakeClock(time.Now())
	m := watchmux.New(merge.Policy{GlobalNamespace: "implicit-global"}, []string{"rolebindings"}, &objects{},
		watchmux.Options{PastStates: watchmux.FairPastStates(fake)})
	m.SetNamespaceList(src.listNamespaces)
	m.SetSourceList("rolebindings", "", src.listBindings)
	for _, ns := range src.namespaces {
		m.OnNamespace(ns, false)
	}
	for _, b := range src.bindings {
		m.OnSource("rolebindings", b, false)
	}
	m.MarkSynced()
	current, err := m.Read(func(watchmux.Reader) {})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := rv.Parse(current)
	if err != nil {
		t.Fatal(err)
	}
	// A version of the vector (namespaces, rolebindings) with RoleBindings
	// at rb and no issuer: any replica's, or made up.
	at := func(rb uint64) string {
		return rv.Version{Fingerprint: cur.Fingerprint, Vector: []uint64{cur.Vector[0], rb}}.String()
	}
	asUser := func(name string) (context.Context, context.CancelFunc) {
		return context.WithCancel(request.WithUser(context.Background(), &user.DefaultInfo{Name: name}))
	}
	watch := func(ctx context.Context, namespace, version string) error {
		w, err := m.Watch(ctx, watchmux.WatchOptions{Resource: "rolebindings", Namespace: namespace, ResourceVersion: version})
		if err == nil {
			w.Stop()
		}
		return err
	}
	before := pastStateCounts(t)

	mallory, stopMallory := asUser("mallory")
	defer stopMallory()
	// A past state at revision 5 (b not created yet), in mallory's turn.
	if err := watch(mallory, "team-x", at(5)); err != nil {
		t.Fatalf("mallory's first past version: %v", err)
	}

	// Then 60 distinct made-up versions at once: the burst's 19 other
	// tokens serve 19, 20 wait for a turn, the rest are answered 429 now.
	const flood = 60
	results := make(chan error, flood)
	var wg sync.WaitGroup
	for i := range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- watch(mallory, "", at(uint64(10+i)))
		}()
	}
	served, refused := 0, 0
	for served+refused < flood-watchmux.PastStateMaxWaiting {
		select {
		case err := <-results:
			switch {
			case err == nil:
				served++
			case apierrors.IsTooManyRequests(err):
				refused++
			default:
				t.Fatalf("a made-up version: %v, want served or 429", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%d served and %d refused after 30s, want %d answered before the clock moves", served, refused, flood-watchmux.PastStateMaxWaiting)
		}
	}
	if served != watchmux.PastStateBurst-1 || refused != flood-watchmux.PastStateMaxWaiting-served {
		t.Errorf("of %d made-up versions: %d served, %d refused at once; want %d served (the burst), %d refused", flood, served, refused, watchmux.PastStateBurst-1, flood-watchmux.PastStateMaxWaiting-(watchmux.PastStateBurst-1))
	}

	// Mallory's turns are used up; her ordinary resumes still don't wait.
	for _, tc := range []struct{ name, namespace, version string }{
		{"the current version", "team-x", current},
		{"the current state, named by another replica", "", at(cur.Vector[1])},
		{"a past version the caches hold", "team-x", at(5)},
		{"a version ahead whose state is the replica's (catch-up)", "team-x", at(150)},
	} {
		ctx, cancel := context.WithTimeout(mallory, 10*time.Second)
		err := watch(ctx, tc.namespace, tc.version)
		cancel()
		if err != nil {
			t.Errorf("mallory's resume from %s with her turns used up: %v, want it served without a turn", tc.name, err)
		}
	}

	// Alice's made-up version is served within one round of tokens.
	alice, stopAlice := asUser("alice")
	defer stopAlice()
	// Her wait is queued once its pastStateWait timer is on the clock.
	waiters := fake.Waiters()
	aliceDone := make(chan error, 1)
	go func() { aliceDone <- watch(alice, "", at(7)) }()
	var aliceErr error
	steps, queued := 0, false
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		select {
		case aliceErr = <-aliceDone:
			return true, nil
		default:
		}
		queued = queued || fake.Waiters() > waiters
		if queued && steps < 2 {
			// One token (1/watchmux.PastStateQPS s) at a time, well inside
			// pastStateWait: mallory's waiters are still queued.
			fake.Step(time.Second / watchmux.PastStateQPS)
			steps++
		}
		return false, nil
	}); err != nil {
		t.Fatalf("alice's made-up version was not answered after %d tokens", steps)
	}
	if aliceErr != nil {
		t.Errorf("alice's made-up version, with mallory's queue full: %v, want it served", aliceErr)
	}

	// The rest of mallory's waiters give up; every turn asked for is
	// counted, and the cached resume as cached.
	stopMallory()
	wg.Wait()
	close(results)
	after := pastStateCounts(t)
	delta := func(result string) float64 { return after[result] - before[result] }
	// Every request answered above asked a turn and is counted; a waiter
	// that gave up while it waited for another request's lists asked none
	// and is not.
	if got, least, most := delta("admitted")+delta("refused"), float64(1+served+refused+1), float64(1+flood+1); got < least || got > most {
		t.Errorf("past_states admitted+refused grew by %v, want %v to %v (one per turn asked): %v -> %v", got, least, most, before, after)
	}
	if delta("refused") < float64(flood-watchmux.PastStateMaxWaiting-(watchmux.PastStateBurst-1)) || delta("admitted") < float64(watchmux.PastStateBurst+1) {
		t.Errorf("past_states grew by admitted %v, refused %v; want at least %d and %d", delta("admitted"), delta("refused"), watchmux.PastStateBurst+1, flood-watchmux.PastStateMaxWaiting-(watchmux.PastStateBurst-1))
	}
	if delta("cached") != 1 {
		t.Errorf("past_states cached grew by %v, want 1 (the resume the caches served)", delta("cached"))
	}
	t.Logf("past_states_total grew by admitted %v, refused %v, cached %v; alice served after %d tokens", delta("admitted"), delta("refused"), delta("cached"), steps)
}
