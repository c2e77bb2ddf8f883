package watchmux_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// TestCutOffResume is issue 38's case 6: every event a resume sends names
// the state the client holds after it, so a client cut off after any of
// them and resumed from its version, on any replica, gets exactly the rest
// and never an event it already holds (kube-apiserver never sends an ADDED
// for an item the client has). A client of replica A resumes on B from one
// of its versions, is cut off after the first event, resumes from that
// event's version on C (started after the writes), is cut off again, then
// on A, and so on, until a bookmark says it is current: it must then hold
// exactly what a fresh list gives, having seen no ADDED of an item it held,
// no MODIFIED or DELETED of one it lacked, and no event twice.
func TestCutOffResume(t *testing.T) {
	t.Parallel()
	for seed := range uint64(3) {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 38))
			f := followClient(t, rng, 40)
			cr := f.c.startReplica(rng) // started after every write
			replicas := []struct {
				name string
				m    *watchmux.Mux
			}{{"B", f.b}, {"C (restarted)", cr}, {"A", f.a}}
			// Cuts after an ADDED with more events to come: the case of the
			// issue, which must be among those checked.
			cutAfterAdded := 0
			for i, e := range f.events {
				if i%4 != 0 {
					continue
				}
				// Every namespace and one; of every name and of one (its
				// events are numbered among the whole view's).
				for _, sc := range []struct{ namespace, name string }{{"", ""}, {"team-c", ""}, {"", "rb-1"}, {"team-c", "rb-1"}} {
					scope := sc.namespace
					s, want := e.state.clone(), f.want
					if scope != "" {
						s, want = s.in(scope), want.in(scope)
					}
					if sc.name != "" {
						s, want = s.named(sc.name), want.named(sc.name)
					}
					version := e.version
					lastAdded := false
					for hop := 0; ; hop++ {
						r := replicas[hop%len(replicas)]
						what := fmt.Sprintf("from event %d, scope %q, name %q, resume %d on %s from %s", i, scope, sc.name, hop, r.name, version)
						if hop > 2*len(f.events)+10 {
							t.Fatalf("%s: still not current after %d resumes", what, hop)
						}
						ev, err := firstEventOrErr(t, r.m, watchmux.WatchOptions{Resource: rolebindings, Namespace: scope, Name: sc.name, ResourceVersion: version, AllowBookmarks: true}, what)
						if err != nil && scope != "" && apierrors.IsResourceExpired(err) && strings.Contains(err.Error(), "before it was deleted") {
							// The namespace was deleted and created again
							// since the version: its past view is not
							// served (issue 38, case 8); the client relists.
							s = want.clone()
							break
						}
						if err != nil {
							t.Fatalf("%s: %v", what, err)
						}
						if ev.Type == watch.Bookmark {
							break
						}
						if lastAdded {
							cutAfterAdded++
						}
						s.apply(t, ev, what)
						if t.Failed() {
							t.FailNow()
						}
						lastAdded = ev.Type == watch.Added
						acc, err := meta.Accessor(ev.Object)
						if err != nil {
							t.Fatal(err)
						}
						version = acc.GetResourceVersion()
					}
					if d := s.diff(want); len(d) > 0 {
						t.Errorf("from event %d, scope %q, name %q: the client does not end with a fresh list's items: %v", i, scope, sc.name, d)
					}
				}
			}
			if cutAfterAdded == 0 {
				t.Error("no client was cut off after an ADDED with more events to come: the case is not checked")
			}
		})
	}
}

// named is the part of s of items called name.
func (s viewState) named(name string) viewState {
	out := viewState{}
	for k, v := range s {
		if strings.HasSuffix(k, "/"+name) {
			out[k] = v
		}
	}
	return out
}

// firstEventOrErr watches m with opts and returns the first event, then
// stops the watch: a client cut off after it; or the watch's error.
func firstEventOrErr(t *testing.T, m *watchmux.Mux, opts watchmux.WatchOptions, what string) (watch.Event, error) {
	t.Helper()
	w, err := m.Watch(t.Context(), opts)
	if err != nil {
		return watch.Event{}, err
	}
	defer w.Stop()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatalf("%s: the watch closed before its first event", what)
		}
		return ev, nil
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no event within 30s", what)
	}
	return watch.Event{}, nil
}
