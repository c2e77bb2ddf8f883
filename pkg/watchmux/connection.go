package watchmux

import (
	"cmp"
	"context"
	"math/rand/v2"
	"net/http"
	"slices"

	"k8s.io/apiserver/pkg/endpoints/request"
)

// One change gives an event to thousands of watchers, and kube-apiserver's
// aggregator carries them to this server as streams of a few HTTP/2
// connections (--http2-max-streams-per-connection each). A frame is read
// off a connection by kube-apiserver's proxy as it arrives: events of one
// connection sent at once are read in one go, events spread over the whole
// fan-out cost one read, one wake-up and one TLS record each. So the
// fan-out hands a change's events to the watchers connection by connection
// (in a random order, 1,700 reads per 2,000 events at 20 streams per
// connection; grouped, 700: docs/benchmarks.md).

type connectionKey struct{}

// WithConnection returns ctx naming the client connection its request came
// on (the request's remote address): watches of one connection get a
// change's events together.
func WithConnection(ctx context.Context, connection string) context.Context {
	return context.WithValue(ctx, connectionKey{}, connection)
}

// connectionOf is the connection ctx names, or "".
func connectionOf(ctx context.Context) string {
	c, _ := ctx.Value(connectionKey{}).(string)
	return c
}

// ConnectionFilter names the connection of every watch request in its
// context, for WithConnection. It goes inside k8s.io/apiserver's filters,
// which tell a watch (the request's info).
func ConnectionFilter(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if info, ok := request.RequestInfoFrom(r.Context()); ok && info.Verb == "watch" && r.RemoteAddr != "" {
			r = r.WithContext(WithConnection(r.Context(), r.RemoteAddr))
		}
		h.ServeHTTP(w, r)
	})
}

// connectionGroup numbers a connection while watchers of it are open.
type connectionGroup struct {
	id       uint64
	watchers int
}

// joinConnectionLocked numbers w's connection. Called with wmu held.
func (m *Mux) joinConnectionLocked(w *watcher) {
	if w.connection == "" {
		return
	}
	g := m.connections[w.connection]
	if g == nil {
		m.lastConnection++
		g = &connectionGroup{id: m.lastConnection}
		m.connections[w.connection] = g
	}
	g.watchers++
	w.group = g.id
}

// leaveConnectionLocked forgets w's connection once no watcher of it is
// open. Called with wmu held.
func (m *Mux) leaveConnectionLocked(w *watcher) {
	g := m.connections[w.connection]
	if g == nil {
		return
	}
	if g.watchers--; g.watchers == 0 {
		delete(m.connections, w.connection)
	}
}

// byConnection orders ws so that the watchers of one connection are next
// to each other, starting at a random one: the order also decides which
// slow watchers wait for the fan-out's time budget first (fanOutLocked),
// and no connection should always come last.
func byConnection(ws []*watcher) {
	slices.SortFunc(ws, func(a, b *watcher) int { return cmp.Compare(a.group, b.group) })
	if len(ws) > 1 {
		i := rand.IntN(len(ws))
		slices.Reverse(ws[:i])
		slices.Reverse(ws[i:])
		slices.Reverse(ws)
	}
}
