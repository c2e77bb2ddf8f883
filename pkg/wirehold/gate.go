package wirehold

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/utils/clock"
)

// DefaultMaxHold bounds how long a byte is held when a connection's holds
// do not end: an event held by another stream's blocked handler still
// reaches the wire within it. In the ordinary course the last flush of a
// fan-out's events on the connection ends the holds, well before.
const DefaultMaxHold = 2 * time.Millisecond

// Gate knows the connections its listener accepted, by remote address, and
// gives each watch request on one of them a Stream.
type Gate struct {
	clock   clock.WithDelayedExecution
	maxHold time.Duration

	mu    sync.Mutex
	conns map[string]*Conn
}

// New returns a Gate whose connections hold bytes at most maxHold.
func New(clk clock.WithDelayedExecution, maxHold time.Duration) *Gate {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Gate{clock: clk, maxHold: maxHold, conns: map[string]*Conn{}}
}

// Listener wraps ln: every connection it accepts is a Conn the Gate knows
// while it is open.
func (g *Gate) Listener(ln net.Listener) net.Listener {
	return &listener{Listener: ln, g: g}
}

type listener struct {
	net.Listener
	g *Gate
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		// As k8s.io/apiserver's listener does for the connections it
		// recognises (it no longer sees a *net.TCPConn).
		_ = tc.SetKeepAlive(true)
		_ = tc.SetKeepAlivePeriod(3 * time.Minute)
	}
	addr := c.RemoteAddr().String()
	var wc *Conn
	wc = NewConn(c, l.g.clock, l.g.maxHold, func() { l.g.forget(addr, wc) })
	l.g.mu.Lock()
	l.g.conns[addr] = wc
	l.g.mu.Unlock()
	return wc, nil
}

func (g *Gate) forget(addr string, c *Conn) {
	g.mu.Lock()
	if g.conns[addr] == c {
		delete(g.conns, addr)
	}
	g.mu.Unlock()
}

func (g *Gate) conn(addr string) *Conn {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.conns[addr]
}

// Filter gives each HTTP/2 watch request on a connection of the Gate's
// listener a Stream, in its context (FromContext), and the Stream as its
// response writer. It goes inside k8s.io/apiserver's filters, which tell a
// watch (the request's info).
func (g *Gate) Filter(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, ok := request.RequestInfoFrom(r.Context())
		if !ok || info.Verb != "watch" || r.ProtoMajor != 2 {
			h.ServeHTTP(w, r)
			return
		}
		c := g.conn(r.RemoteAddr)
		if c == nil {
			h.ServeHTTP(w, r)
			return
		}
		s := NewStream(c, w)
		if s == nil {
			h.ServeHTTP(w, r)
			return
		}
		defer s.End()
		h.ServeHTTP(s, r.WithContext(NewContext(r.Context(), s)))
	})
}

// NewStream returns the Stream of a response written to w on c, as Filter
// gives its handler, or nil when w cannot flush.
func NewStream(c *Conn, w http.ResponseWriter) *Stream {
	f, ok := w.(flushNotifier)
	if !ok {
		return nil
	}
	return &Stream{conn: c, w: w, f: f}
}

// NewContext returns ctx carrying s, for FromContext.
func NewContext(ctx context.Context, s *Stream) context.Context {
	return context.WithValue(ctx, streamKey{}, s)
}

type streamKey struct{}

// FromContext returns the Stream of a watch request, or nil.
func FromContext(ctx context.Context) *Stream {
	s, _ := ctx.Value(streamKey{}).(*Stream)
	return s
}
