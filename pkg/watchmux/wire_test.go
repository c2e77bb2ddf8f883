package watchmux_test

import (
	"bytes"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
	"github.com/implicit-dev/implicit-apiserver/pkg/wirehold"
)

// wireRecorder is a net.Conn that keeps what is written to it.
type wireRecorder struct {
	net.Conn // nil: only Write is called
	mu       sync.Mutex
	written  bytes.Buffer
}

func (r *wireRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.written.Write(p)
}

func (r *wireRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.written.String()
}

// flushingWriter is the HTTP/2 response writer a watch handler flushes.
type flushingWriter struct{ flushes int }

func (*flushingWriter) Header() http.Header         { return http.Header{} }
func (*flushingWriter) Write(b []byte) (int, error) { return len(b), nil }
func (*flushingWriter) WriteHeader(int)             {}
func (f *flushingWriter) Flush()                    { f.flushes++ }
func (*flushingWriter) CloseNotify() <-chan bool    { return nil }

// A watch served on a held connection (pkg/wirehold) holds it from the
// fan-out's hand-off of an event until its handler has flushed that event:
// the frames written meanwhile reach the wire together, then, and the
// holds end with the watch.
func TestWatchHoldsItsConnectionUntilTheHandlerFlushed(t *testing.T) {
	m := newMux(watchmux.Options{})
	for _, s := range hierarchy() {
		s(m)
	}
	m.MarkSynced()
	rec := &wireRecorder{}
	conn := wirehold.NewConn(rec, clock.RealClock{}, time.Hour, nil)
	rw := &flushingWriter{}
	s := wirehold.NewStream(conn, rw)
	w, err := m.Watch(wirehold.NewContext(t.Context(), s), watchmux.WatchOptions{Resource: rolebindings, Namespace: "solo", SendInitialEvents: ptr.To(false)})
	if err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"a", "b"} {
		putRB("solo", name)(m)
		e := <-w.ResultChan() // the handler took the event
		before := rec.String()
		// What the serve loop writes of the handler's frame is held.
		if _, err := conn.Write([]byte(name + ";")); err != nil {
			t.Fatal(err)
		}
		if got := rec.String(); got != before {
			t.Fatalf("event %s: %q written before the handler flushed it", name, got)
		}
		s.Flush()
		testwait.For(t, "the held frame written after the flush", func() bool { return rec.String() == before+name+";" })
		if e.Type == "" {
			t.Fatalf("empty event")
		}
	}

	w.Stop()
	s.End()
	for range w.ResultChan() {
	}
	if _, err := conn.Write([]byte("after;")); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.String(), "a;b;after;"; got != want {
		t.Fatalf("after the watch ended: written %q, want %q (a hold left)", got, want)
	}
}
