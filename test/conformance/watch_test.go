package conformance

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// fenceTimeout bounds the wait for a change's event on a watch.
const fenceTimeout = 10 * time.Second

// watchOutcome is what a watch answered, as the suite compares it.
type watchOutcome struct {
	// Code and Reason of the response; 200 for a stream.
	Code   int
	Reason string
	// Events are the shapes of the events up to the change's, periodic
	// bookmarks left out.
	Events []string
	// Fenced says the change's event arrived.
	Fenced bool
	// Bookmarks says a bookmark (periodic or initial-events-end) arrived.
	Bookmarks bool
	// Open says the stream was still open after the change's event.
	Open bool
	// rvs are the events' resourceVersions, each side's own numbers.
	rvs []string
}

func (o watchOutcome) String() string {
	if o.Code != http.StatusOK {
		return fmt.Sprintf("%d %s", o.Code, o.Reason)
	}
	return fmt.Sprintf("200 [%s] fenced=%t bookmarks=%t open=%t", strings.Join(o.Events, ", "), o.Fenced, o.Bookmarks, o.Open)
}

// comparable is the outcome without what is each side's own.
func (o watchOutcome) comparable() string { return o.String() }

// The outcomes of a watch that cannot start from its version: one ERROR
// event in a 200 stream, which then ends, as from kube-apiserver's watch cache.
const (
	expiredStream = "200 [ERROR(410 Expired)] fenced=false bookmarks=false open=false"
	timeoutStream = "200 [ERROR(504 Timeout)] fenced=false bookmarks=false open=false"
)

// rvOf names how a case picks its resourceVersion for one side.
type rvOf func(w *world, tg target) string

func fixedRV(rv string) rvOf { return func(*world, target) string { return rv } }

// listedRV is the side's list resourceVersion: each side's own number.
func listedRV(w *world, tg target) string { return w.listRV(tg) }

// futureRV is a version the side has not issued yet: its list's plus a
// million, each side's own (the view's: one source's revision a million
// ahead of its list's).
func futureRV(w *world, tg target) string {
	if tg == view {
		v, err := resourceversion.Parse(w.listRV(tg))
		if err != nil || len(v.Vector) == 0 {
			w.t.Fatalf("the view's list version %q: %v", w.listRV(tg), err)
		}
		v.Vector[len(v.Vector)-1] += 1_000_000
		v.Seq = 0
		return v.String()
	}
	n, err := strconv.ParseUint(w.listRV(tg), 10, 64)
	if err != nil {
		w.t.Fatal(err)
	}
	return strconv.FormatUint(n+1_000_000, 10)
}

// runWatchCase opens the same watch on both sides of one world, makes
// change (whose event on each side is the fence), and returns both outcomes.
func runWatchCase(t *testing.T, w *world, rv rvOf, q url.Values, change func(), fence func(event) bool) (nat, vw watchOutcome) {
	t.Helper()
	open := func(tg target) *stream {
		q2 := url.Values{}
		for k, v := range q {
			q2[k] = v
		}
		if rv != nil {
			if v := rv(w, tg); v != "" {
				q2.Set("resourceVersion", v)
			}
		}
		return w.watch(tg, q2)
	}
	ns, vs := open(native), open(view)
	if ns.Code == http.StatusOK || vs.Code == http.StatusOK {
		change()
	}
	var wg sync.WaitGroup
	collect := func(s *stream, out *watchOutcome) {
		defer wg.Done()
		*out = watchOutcome{Code: s.Code, Reason: string(s.Reason)}
		if s.Code != http.StatusOK {
			return
		}
		events, fenced := s.until(fenceTimeout, func(e event) bool { return e.Type == "ERROR" || fence(e) })
		out.Events, out.Bookmarks = shapes(events)
		out.Fenced = fenced && events[len(events)-1].Type != "ERROR"
		out.Open = s.isOpen()
		if len(events) > 0 && events[len(events)-1].Type == "ERROR" {
			// An ERROR event ends the stream: give the server time to close it.
			select {
			case <-s.closed:
			case <-time.After(fenceTimeout):
			}
			out.Open = s.isOpen()
		}
		for _, e := range events {
			if e.Type != "ERROR" {
				out.rvs = append(out.rvs, e.RV)
			}
		}
		s.cancel()
	}
	wg.Add(2)
	go collect(ns, &nat)
	go collect(vs, &vw)
	wg.Wait()
	return nat, vw
}

// added is a fence on the ADDED event of name.
func added(name string) func(event) bool {
	return func(e event) bool { return e.Type == "ADDED" && e.Name == name }
}

// TestWatchMatrix opens the same watch of native RoleBindings and of the
// view for each resourceVersion, allowWatchBookmarks and sendInitialEvents,
// creates a RoleBinding, and compares everything up to its event.
func TestWatchMatrix(t *testing.T) {
	t.Parallel()
	rvs := []struct {
		name string
		rv   rvOf
	}{
		{"rv unset", nil},
		{`rv "0"`, fixedRV("0")},
		// Each side's own list version: views issue their own numbers.
		{"rv of a list", listedRV},
		// A version of before each side's restart: each side's own.
		{"rv older than history", func(_ *world, tg target) string {
			if tg == native {
				return expiredNativeRV
			}
			return expiredViewRV
		}},
		{"rv from the future", futureRV},
		{"rv malformed", fixedRV("not-a-version")},
	}
	sends := []struct {
		name string
		q    []string
	}{
		{"sendInitialEvents unset", nil},
		{"sendInitialEvents=true", []string{"sendInitialEvents", "true", "resourceVersionMatch", "NotOlderThan"}},
		{"sendInitialEvents=false", []string{"sendInitialEvents", "false", "resourceVersionMatch", "NotOlderThan"}},
		// Invalid: resourceVersionMatch without sendInitialEvents (422).
		{"resourceVersionMatch alone", []string{"resourceVersionMatch", "NotOlderThan"}},
	}
	for _, rv := range rvs {
		for _, bm := range []bool{false, true} {
			for _, send := range sends {
				name := fmt.Sprintf("%s/bookmarks=%t/%s", rv.name, bm, send.name)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					w := newWorld(t, []string{"rb-a", "rb-b"}, nil)
					q := query(send.q...)
					if bm {
						q.Set("allowWatchBookmarks", "true")
					}
					nat, vw := runWatchCase(t, w, rv.rv, q, func() { w.create("rb-c", nil) }, added("rb-c"))
					t.Logf("%s\n native: %s\n view:   %s", t.Name(), nat, vw)
					validation := nat.Code == http.StatusUnprocessableEntity
					switch {
					case rv.name == "rv malformed" && !validation:
						// Where views differ: kube-apiserver answers a malformed
						// version with 500; a view, as for any version it did
						// not issue, with 410 Expired, so that clients relist.
						if got := vw.comparable(); got != expiredStream {
							t.Errorf("a malformed version: view %s, want %s", got, expiredStream)
						}
					case rv.name == "rv from the future" && send.name != "sendInitialEvents=true" && !validation:
						// Where views differ: kube-apiserver holds a watch from a
						// version it has not reached until it does; a view waits
						// 3 s for its informers, as kube-apiserver's cache does for
						// a watch-list, then answers 504 Timeout.
						if got := vw.comparable(); got != timeoutStream {
							t.Errorf("a version from the future: view %s, want %s", got, timeoutStream)
						}
					case rv.name == "rv older than history" && send.name != "sendInitialEvents=true" && !validation:
						// Where views differ: the view's version is of its run
						// before a restart, within etcd's compaction window: it
						// serves it (the events since, then the fence), where
						// kube-apiserver, whose watch cache starts afresh after its
						// own restart, answers 410 Expired.
						if !vw.Fenced || vw.Code != http.StatusOK {
							t.Errorf("a watch from before the view's restart: view %s, want served up to the fence", vw)
						}
					case nat.comparable() != vw.comparable():
						t.Errorf("the view answers differently:\n native %s\n view   %s", nat, vw)
					}
					if !bm && (nat.Bookmarks || vw.Bookmarks) {
						t.Errorf("a bookmark nobody asked for: native %t, view %t", nat.Bookmarks, vw.Bookmarks)
					}
					// Versions are each side's own: compare their shape (etcd's
					// decimal revisions; the view's vectors).
					for _, v := range nat.rvs {
						if _, err := strconv.ParseUint(v, 10, 64); err != nil {
							t.Errorf("native event resourceVersion %q is not a decimal integer", v)
						}
					}
					for _, v := range vw.rvs {
						if !resourceversion.IsVersion(v) {
							t.Errorf("view event resourceVersion %q is not a vector version", v)
						}
					}
				})
			}
		}
	}
}

// TestWatchSelectors compares watches of one name (what kubectl get NAME -w
// sends) and by label, as items change, enter and leave the selection.
func TestWatchSelectors(t *testing.T) {
	t.Parallel()
	gold, silver := map[string]string{"tier": "gold"}, map[string]string{"tier": "silver"}
	tests := []struct {
		name   string
		q      []string
		rv     rvOf
		labels map[string]map[string]string
		change func(w *world)
		fence  func(event) bool
		want   []string
	}{
		{
			name: "by name", q: []string{"fieldSelector", "metadata.name=rb-a"},
			change: func(w *world) {
				w.relabel("rb-b", gold)
				w.relabel("rb-a", gold)
				w.delete("rb-a")
			},
			fence: func(e event) bool { return e.Type == "DELETED" },
			want:  []string{"ADDED rb-a", "MODIFIED rb-a", "DELETED rb-a"},
		},
		{
			name: "by name from a list's version", q: []string{"fieldSelector", "metadata.name=rb-a"}, rv: listedRV,
			change: func(w *world) {
				w.relabel("rb-b", gold)
				w.relabel("rb-a", gold)
				w.delete("rb-a")
			},
			fence: func(e event) bool { return e.Type == "DELETED" },
			want:  []string{"MODIFIED rb-a", "DELETED rb-a"},
		},
		{
			name: "by label: entering and leaving", q: []string{"labelSelector", "tier=gold"},
			labels: map[string]map[string]string{"rb-a": gold, "rb-b": silver},
			change: func(w *world) {
				w.relabel("rb-b", gold)   // enters: ADDED
				w.relabel("rb-a", silver) // leaves: DELETED
				w.create("rb-c", gold)
			},
			fence: added("rb-c"),
			want:  []string{"ADDED rb-a", "ADDED rb-b", "DELETED rb-a", "ADDED rb-c"},
		},
		{
			name: "by label from a list's version, with bookmarks", q: []string{"labelSelector", "tier=gold", "allowWatchBookmarks", "true"}, rv: listedRV,
			labels: map[string]map[string]string{"rb-a": gold, "rb-b": silver},
			change: func(w *world) {
				w.relabel("rb-b", gold)
				w.relabel("rb-a", silver)
				w.create("rb-c", gold)
			},
			fence: added("rb-c"),
			want:  []string{"ADDED rb-b", "DELETED rb-a", "ADDED rb-c"},
		},
		{
			name: "by label, watch-list", q: []string{"labelSelector", "tier=gold", "allowWatchBookmarks", "true", "sendInitialEvents", "true", "resourceVersionMatch", "NotOlderThan"},
			labels: map[string]map[string]string{"rb-a": gold, "rb-b": silver},
			change: func(w *world) {
				w.delete("rb-a")
				w.create("rb-c", gold)
			},
			fence: added("rb-c"),
			want:  []string{"ADDED rb-a", "BOOKMARK(initial-events-end)", "DELETED rb-a", "ADDED rb-c"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, []string{"rb-a", "rb-b"}, tt.labels)
			nat, vw := runWatchCase(t, w, tt.rv, query(tt.q...), func() { tt.change(w) }, tt.fence)
			t.Logf("%s\n native: %s\n view:   %s", t.Name(), nat, vw)
			if nat.comparable() != vw.comparable() {
				t.Errorf("the view answers differently:\n native %s\n view   %s", nat, vw)
			}
			if got := strings.Join(nat.Events, ", "); got != strings.Join(tt.want, ", ") {
				t.Errorf("native events [%s], want [%s]: the case is wrong", got, strings.Join(tt.want, ", "))
			}
		})
	}
}
