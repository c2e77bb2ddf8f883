package wirehold_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/utils/clock"

	"github.com/implicit-dev/implicit-apiserver/pkg/wirehold"
)

// countingListener counts the write calls on the connections it accepts.
type countingListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, writes: l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A real HTTP/2 server over TLS, 20 watch streams on one connection, each
// handler writing and flushing every event as k8s.io/apiserver's watch
// handler does: while a fan-out holds the connection, a round's 20 events
// go out in one or two write calls (not 20), every stream receives every
// event in order, and the streams end cleanly.
func TestGateSharesWritesOfOneConnection(t *testing.T) {
	const streams, rounds = 20, 50
	gate := wirehold.New(clock.RealClock{}, time.Second)
	var writes atomic.Int64

	type watch struct {
		s      *wirehold.Stream
		events chan string
	}
	var mu sync.Mutex
	watches := map[int]*watch{}
	opened := make(chan struct{}, streams)
	var flushed sync.WaitGroup
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id int
		_, _ = fmt.Sscanf(r.URL.Query().Get("id"), "%d", &id)
		s := wirehold.FromContext(r.Context())
		if s == nil {
			http.Error(w, "no stream", http.StatusInternalServerError)
			return
		}
		wt := &watch{s: s, events: make(chan string)}
		mu.Lock()
		watches[id] = wt
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		opened <- struct{}{}
		for e := range wt.events {
			_, _ = io.WriteString(w, e+"\n")
			w.(http.Flusher).Flush()
			flushed.Done()
		}
	})
	asWatch := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := request.WithRequestInfo(r.Context(), &request.RequestInfo{IsResourceRequest: true, Verb: "watch"})
		gate.Filter(handler).ServeHTTP(w, r.WithContext(ctx))
	})
	srv := httptest.NewUnstartedServer(asWatch)
	srv.EnableHTTP2 = true
	srv.Listener = gate.Listener(countingListener{Listener: srv.Listener, writes: &writes})
	srv.StartTLS()
	defer srv.Close()

	client := srv.Client()
	received := make([][]string, streams)
	var readers sync.WaitGroup
	for id := range streams {
		resp, err := client.Get(fmt.Sprintf("%s/watch?id=%d", srv.URL, id))
		if err != nil {
			t.Fatal(err)
		}
		if resp.ProtoMajor != 2 {
			t.Fatalf("HTTP/%d, want 2", resp.ProtoMajor)
		}
		readers.Go(func() {
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				received[id] = append(received[id], sc.Text())
			}
			if err := sc.Err(); err != nil {
				t.Errorf("stream %d: %v", id, err)
			}
		})
	}
	for range streams {
		<-opened
	}

	before := writes.Load()
	for r := range rounds {
		// As the fan-out does: the connection is held for each event
		// handed to a watch, the hold passed to the handler, and released
		// once handed.
		flushed.Add(streams)
		for id := range streams {
			wt := watches[id]
			wt.s.Hold()
			if !wt.s.Handing() {
				t.Fatalf("stream %d ended", id)
			}
			wt.events <- fmt.Sprintf("s%d-e%d", id, r)
		}
		flushed.Wait()
		for id := range streams {
			watches[id].s.Release()
		}
	}
	perRound := float64(writes.Load()-before) / rounds
	for _, wt := range watches {
		close(wt.events)
	}
	readers.Wait()

	for id := range streams {
		if len(received[id]) != rounds {
			t.Fatalf("stream %d received %d events, want %d", id, len(received[id]), rounds)
		}
		for r, got := range received[id] {
			if want := fmt.Sprintf("s%d-e%d", id, r); got != want {
				t.Fatalf("stream %d event %d: %q, want %q", id, r, got, want)
			}
		}
	}
	t.Logf("%d events per round in %.2f write calls", streams, perRound)
	// The held round in one call, and the serve loop's flush of the last
	// frame if it came after the release: never one per event.
	if perRound > 2 {
		t.Errorf("%.2f write calls per round of %d events, want at most 2", perRound, streams)
	}
}

// Requests that are not watches, and watches without a Stream, are served
// as they are: no Stream, and nothing held.
func TestGatePassesOtherRequests(t *testing.T) {
	gate := wirehold.New(nil, wirehold.DefaultMaxHold)
	tests := []struct {
		name string
		verb string
		want bool
	}{
		{name: "watch", verb: "watch", want: true},
		{name: "list", verb: "list", want: false},
		{name: "get", verb: "get", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got atomic.Bool
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got.Store(wirehold.FromContext(r.Context()) != nil)
				_, _ = io.WriteString(w, "ok")
			})
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ctx := request.WithRequestInfo(r.Context(), &request.RequestInfo{IsResourceRequest: true, Verb: tt.verb})
				gate.Filter(h).ServeHTTP(w, r.WithContext(ctx))
			}))
			srv.EnableHTTP2 = true
			srv.Listener = gate.Listener(srv.Listener)
			srv.StartTLS()
			defer srv.Close()
			resp, err := srv.Client().Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if string(body) != "ok" {
				t.Fatalf("body %q", body)
			}
			if got.Load() != tt.want {
				t.Errorf("Stream given: %v, want %v", got.Load(), tt.want)
			}
		})
	}
}
