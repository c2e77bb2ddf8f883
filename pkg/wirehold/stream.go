package wirehold

import (
	"net/http"
	"sync"
)

// Stream is one watch request's response on a held connection. Its watch
// holds the connection while an event is on its way to the request's
// handler (Hold, Release); Handing passes a hold to the handler, whose next
// flush releases it. A Stream is the handler's http.ResponseWriter: a
// flush still sends the stream's bytes to the connection at once, and the
// connection writes them once nothing holds it.
type Stream struct {
	conn *Conn
	w    http.ResponseWriter
	f    flushNotifier

	mu      sync.Mutex
	handing int
	ended   bool
}

// flushNotifier is what k8s.io/apiserver's response writer decorators
// (responsewriter.WrapForHTTP1Or2) want of the writer they wrap to keep
// http.Flusher: HTTP/2's writer is both.
type flushNotifier interface {
	http.Flusher
	http.CloseNotifier //nolint:staticcheck // required by k8s.io/apiserver's decorators
}

var (
	_ http.ResponseWriter = &Stream{}
	_ flushNotifier       = &Stream{}
)

// Hold holds the stream's connection: an event is on its way to the
// watch.
func (s *Stream) Hold() { s.conn.Hold() }

// Release ends a Hold.
func (s *Stream) Release() { s.conn.Release(1) }

// ReleaseLater ends a Hold from a goroutine that must not wait for the
// connection.
func (s *Stream) ReleaseLater() { s.conn.ReleaseLater(1) }

// Handing holds the connection until the handler's next flush: the
// watch is about to hand the handler an event. False once the request has
// ended.
func (s *Stream) Handing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.handing++
	s.conn.Hold()
	return true
}

// NotHanded ends a Handing whose event the handler did not take.
func (s *Stream) NotHanded() {
	s.mu.Lock()
	n := min(s.handing, 1)
	s.handing -= n
	s.mu.Unlock()
	if n > 0 {
		s.conn.Release(n)
	}
}

// releaseHanded ends the holds passed to the handler.
func (s *Stream) releaseHanded(end bool) {
	s.mu.Lock()
	n := s.handing
	s.handing = 0
	if end {
		s.ended = true
	}
	s.mu.Unlock()
	if n > 0 {
		s.conn.Release(n)
	}
}

// End ends the holds passed to the handler, once it has returned: its
// events will not be written.
func (s *Stream) End() { s.releaseHanded(true) }

// Header implements http.ResponseWriter.
func (s *Stream) Header() http.Header { return s.w.Header() }

// Write implements http.ResponseWriter.
func (s *Stream) Write(b []byte) (int, error) { return s.w.Write(b) }

// WriteHeader implements http.ResponseWriter.
func (s *Stream) WriteHeader(code int) { s.w.WriteHeader(code) }

// Flush sends what the handler wrote to the connection and ends the holds
// passed to the handler: the events it took are written.
func (s *Stream) Flush() {
	s.f.Flush()
	s.releaseHanded(false)
}

// CloseNotify implements http.CloseNotifier, for k8s.io/apiserver's
// decorators.
func (s *Stream) CloseNotify() <-chan bool { return s.f.CloseNotify() }

// Unwrap returns the response writer the Stream wraps (for
// http.ResponseController and k8s.io/apiserver's decorators).
func (s *Stream) Unwrap() http.ResponseWriter { return s.w }
