package watchmux

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apiserver/pkg/endpoints/request"
)

// TestConnectionGroups checks that the watchers of one connection share a
// group while any of them is open, that the fan-out's order puts them
// together, and that a connection is forgotten with its last watcher.
func TestConnectionGroups(t *testing.T) {
	m := &Mux{watchers: map[*watcher]struct{}{}, allNamespaces: map[*watcher]struct{}{},
		byNamespace: map[string][]*watcher{}, connections: map[string]*connectionGroup{}}
	var ws []*watcher
	for i, conn := range []string{"10.0.0.1:1001", "10.0.0.1:1002", "", "10.0.0.1:1001", "10.0.0.1:1002", "10.0.0.1:1001"} {
		w := &watcher{opts: WatchOptions{Namespace: []string{"a", "b", "c"}[i%3]}, connection: connectionOf(WithConnection(context.Background(), conn))}
		m.addWatcherLocked(w)
		ws = append(ws, w)
	}
	if ws[0].group == 0 || ws[0].group != ws[3].group || ws[0].group != ws[5].group || ws[1].group != ws[4].group || ws[0].group == ws[1].group {
		t.Fatalf("groups %d %d %d %d %d %d: want one per connection", ws[0].group, ws[1].group, ws[2].group, ws[3].group, ws[4].group, ws[5].group)
	}
	if ws[2].group != 0 {
		t.Errorf("a watcher without a connection has group %d, want 0", ws[2].group)
	}
	// The order starts at a random watcher: each connection's watchers are
	// next to each other, the last and the first being next to each other.
	starts := map[uint64]bool{}
	for range 50 {
		order := append([]*watcher(nil), ws...)
		byConnection(order)
		groups, boundaries := map[uint64]bool{}, 0
		for i, w := range order {
			groups[w.group] = true
			if w.group != order[(i+1)%len(order)].group {
				boundaries++
			}
		}
		if boundaries != len(groups) {
			t.Fatalf("order %v: %d groups in %d runs, want one run each", groupsOf(order), len(groups), boundaries)
		}
		starts[order[0].group] = true
	}
	if len(starts) < 2 {
		t.Errorf("in 50 fan-outs the order always started with group %v", starts)
	}
	for _, w := range []*watcher{ws[0], ws[3]} {
		m.removeWatcherLocked(w)
	}
	if g := m.connections["10.0.0.1:1001"]; g == nil || g.watchers != 1 {
		t.Fatalf("after two of its three watchers left, connection 1001: %+v, want 1 watcher", g)
	}
	m.removeWatcherLocked(ws[5])
	m.removeWatcherLocked(ws[5]) // a second removal changes nothing
	if _, ok := m.connections["10.0.0.1:1001"]; ok {
		t.Error("connection 1001 is still numbered after its last watcher left")
	}
	if g := m.connections["10.0.0.1:1002"]; g == nil || g.watchers != 2 {
		t.Errorf("connection 1002: %+v, want 2 watchers", g)
	}
}

// TestConnectionFilter checks that a watch request's context names its
// connection, and that other requests are left as they are.
func TestConnectionFilter(t *testing.T) {
	var got string
	h := ConnectionFilter(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = connectionOf(r.Context()) }))
	for _, tc := range []struct {
		verb string // "": no request info
		want string
	}{{"watch", "192.0.2.1:1234"}, {"list", ""}, {"get", ""}, {"", ""}} {
		got = "unset"
		r := httptest.NewRequest(http.MethodGet, "/apis/implicit.dev/v1alpha1/namespaces/a/rolebindings?watch", nil)
		if tc.verb != "" {
			r = r.WithContext(request.WithRequestInfo(r.Context(), &request.RequestInfo{IsResourceRequest: true, Verb: tc.verb}))
		}
		r.RemoteAddr = "192.0.2.1:1234"
		h.ServeHTTP(httptest.NewRecorder(), r)
		if got != tc.want {
			t.Errorf("verb %q: connection %q, want %q", tc.verb, got, tc.want)
		}
	}
}

func groupsOf(ws []*watcher) []uint64 {
	var out []uint64
	for _, w := range ws {
		out = append(out, w.group)
	}
	return out
}
