package watchmux_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// resultsAt is m's views of rolebindings in namespace ("" for all) at
// version, as a client holds them.
func resultsAt(t *testing.T, m *watchmux.Mux, version, namespace string) (viewState, error) {
	t.Helper()
	all, err := m.ResultsAt(t.Context(), version, rolebindings, namespace, "")
	if err != nil {
		return nil, err
	}
	s := viewState{}
	for _, nr := range all {
		for _, r := range nr.Results {
			obj, err := (&objects{}).Item(rolebindings, nr.Namespace, r, version)
			if err != nil {
				t.Fatal(err)
			}
			k, v := itemKey(t, obj)
			s[k] = v
		}
	}
	return s, nil
}

// TestResultsAtPastVersion is the exact list of a past version: after any
// event of replica A (inside a change's events too), A itself, replica B
// (the same writes in another order) and replica C (started after them)
// answer the views as the client held them after that event, for every
// namespace and for one; a compacted version answers 410 Gone.
func TestResultsAtPastVersion(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 31))
	f := followClient(t, rng, 40)
	c, a, b, events := f.c, f.a, f.b, f.events
	cr := c.startReplica(rng)
	for i, e := range events {
		if i%3 != 0 && i != len(events)-1 {
			continue
		}
		for name, m := range map[string]*watchmux.Mux{"A": a, "B": b, "C (restarted)": cr} {
			for _, scope := range []string{"", "team-c"} {
				what := fmt.Sprintf("event %d (%s) on %s, scope %q", i, e.version, name, scope)
				got, err := resultsAt(t, m, e.version, scope)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				held := e.state
				if scope != "" {
					held = held.in(scope)
				}
				if d := got.diff(held); len(d) > 0 {
					t.Errorf("%s: the views at the version are not what the client held: %v", what, d)
				}
			}
		}
	}

	c.mu.Lock()
	c.compacted = c.rev
	c.mu.Unlock()
	fresh := c.startReplica(rng) // no cached lists
	if _, err := resultsAt(t, fresh, events[0].version, ""); !apierrors.IsResourceExpired(err) {
		t.Errorf("the views at a compacted version: err = %v, want 410 Gone", err)
	}
	if _, err := resultsAt(t, fresh, "f1.v1-1", ""); !apierrors.IsResourceExpired(err) {
		t.Errorf("the views at another fingerprint's version: err = %v, want 410 Gone", err)
	}
}
