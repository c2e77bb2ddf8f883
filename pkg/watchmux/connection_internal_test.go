package watchmux

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
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
	order := append([]*watcher(nil), ws...)
	byConnection(order)
	seen := map[uint64]bool{}
	for i, w := range order {
		if i > 0 && order[i-1].group != w.group && seen[w.group] {
			t.Fatalf("group %d is split in the fan-out's order", w.group)
		}
		seen[w.group] = true
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
	for _, tc := range []struct{ target, want string }{
		{"/apis/implicit.dev/v1alpha1/namespaces/a/rolebindings?watch=true&resourceVersion=1", "192.0.2.1:1234"},
		{"/apis/implicit.dev/v1alpha1/watch/namespaces/a/rolebindings", "192.0.2.1:1234"},
		{"/apis/implicit.dev/v1alpha1/namespaces/a/rolebindings?limit=500", ""},
	} {
		got = "unset"
		r := httptest.NewRequest(http.MethodGet, tc.target, nil)
		r.RemoteAddr = "192.0.2.1:1234"
		h.ServeHTTP(httptest.NewRecorder(), r)
		if got != tc.want {
			t.Errorf("%s: connection %q, want %q", tc.target, got, tc.want)
		}
	}
}
