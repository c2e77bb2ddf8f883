package watchmux_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// stalledLister is an exact lister whose lists don't answer (kube-apiserver
// restarting, its watch cache initializing) until released or their
// context ends, as client-go's do.
type stalledLister struct {
	inner   watchmux.ListFunc
	release chan struct{}
	once    sync.Once

	mu    sync.Mutex
	calls int
}

func newStalledLister(inner watchmux.ListFunc) *stalledLister {
	return &stalledLister{inner: inner, release: make(chan struct{})}
}

func (s *stalledLister) list(ctx context.Context, rv, namespace string) ([]runtime.Object, error) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	select {
	case <-s.release:
		return s.inner(ctx, rv, namespace)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *stalledLister) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func (s *stalledLister) answer() { s.once.Do(func() { close(s.release) }) }

// TestPastStateWaitBounded: a list or a watch from a version this replica
// has no history for, whose sources' exact lists kube-apiserver does not
// answer, waits for them pastWait at most (on the mux's clock), well within
// the request timeout, and is answered 429 with Retry-After; a second
// request for the same version waits for the same lists (no list of its
// own) with its own bound; once they answer, the next request is served
// from them. Before, the request waited inside the shared build, whose
// lists take a context of their own (a minute, the request timeout): a view
// list hung for the whole request timeout while kube-apiserver restarted.
func TestPastStateWaitBounded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		namespace string
		watch     bool
	}{
		{name: "list of every namespace", namespace: ""},
		{name: "list of one namespace", namespace: "team-x"},
		{name: "watch of every namespace", namespace: "", watch: true},
		{name: "watch of one namespace", namespace: "team-x", watch: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &fakeCluster{}
			c.write("namespaces", namespace(global), false)
			c.write("namespaces", namespace("team-x"), false)
			c.write(rolebindings, roleBinding("team-x", "a"), false)
			past := currentVersion(t, c.startReplica(rand.New(rand.NewPCG(38, 1))))
			c.write(rolebindings, roleBinding("team-x", "b"), false)

			clk := clocktesting.NewFakeClock(time.Now())
			stalled := newStalledLister(c.lister("namespaces"))
			t.Cleanup(stalled.answer)
			m := newMux(watchmux.Options{Clock: clk})
			m.SetNamespaceList(stalled.list)
			m.SetSourceList(rolebindings, "", c.lister(rolebindings))
			c.mu.Lock()
			r := c.rev
			c.mu.Unlock()
			for _, key := range []string{"namespaces", rolebindings} {
				for _, o := range c.objects(key, r) {
					feedChange(m, fakeChange{key: key, obj: o})
				}
			}
			m.MarkSynced()
			m.Progress("namespaces", r)
			m.Progress(rolebindings, r)

			// request reads past as the test case does: its error, and
			// the names of what it got.
			request := func(ctx context.Context) ([]string, error) {
				if tc.watch {
					w, err := m.Watch(ctx, watchmux.WatchOptions{Resource: rolebindings, Namespace: tc.namespace, ResourceVersion: past})
					if err != nil {
						return nil, err
					}
					defer w.Stop()
					var got []string
					for ev := range w.ResultChan() {
						got = append(got, describeEvent(ev))
						break
					}
					return got, nil
				}
				res, err := m.ResultsAt(ctx, past, rolebindings, tc.namespace, "")
				var got []string
				for _, nr := range res {
					for _, r := range nr.Results {
						got = append(got, nr.Namespace+"/"+r.Item.Name)
					}
				}
				return got, err
			}
			// stalledRequest starts a request while the lists are
			// stalled, steps the clock past pastWait once it waits, and
			// returns its answer: it must come without the lists.
			stalledRequest := func(what string) error {
				t.Helper()
				done := make(chan error, 1)
				go func() {
					_, err := request(t.Context())
					done <- err
				}()
				var err error
				answered := func(context.Context) (bool, error) {
					select {
					case err = <-done:
						return true, nil
					default:
					}
					if clk.HasWaiters() {
						clk.Step(watchmux.PastWait)
					}
					return false, nil
				}
				if perr := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, answered); perr != nil {
					t.Fatalf("%s: still waiting for kube-apiserver's lists after %s, its bound on the mux's clock %s (a wait bounded only by the lists' own timeout)", what, 10*time.Second, watchmux.PastWait)
				}
				return err
			}
			expectRetryLater := func(what string, err error) {
				t.Helper()
				if !apierrors.IsTooManyRequests(err) {
					t.Fatalf("%s: %v, want 429 TooManyRequests", what, err)
				}
				if s, ok := apierrors.SuggestsClientDelay(err); !ok || s <= 0 {
					t.Errorf("%s: %v says no Retry-After", what, err)
				}
			}

			expectRetryLater("the first request", stalledRequest("the first request"))
			expectRetryLater("a second request while the lists are under way", stalledRequest("a second request"))
			if n := stalled.count(); n != 1 {
				t.Errorf("%d lists of the namespaces, want 1: the second request waits for the first's", n)
			}

			stalled.answer()
			var got []string
			served := func(context.Context) (bool, error) {
				var err error
				got, err = request(t.Context())
				if apierrors.IsTooManyRequests(err) {
					clk.Step(watchmux.PastWait) // the build has not ended yet
					return false, nil
				}
				return true, err
			}
			if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, served); err != nil {
				t.Fatalf("once kube-apiserver answers: %v", err)
			}
			// The view at past holds a; the watch's first event takes the
			// client to the current view.
			want := "team-x/a"
			if tc.watch {
				want = "ADDED team-x/b local@team-x"
			}
			if len(got) != 1 || got[0] != want {
				t.Errorf("once kube-apiserver answers: %q, want [%s]", got, want)
			}
			if n := stalled.count(); n != 1 {
				t.Errorf("%d lists of the namespaces in all, want 1: the requests after share the first's", n)
			}
		})
	}
}
