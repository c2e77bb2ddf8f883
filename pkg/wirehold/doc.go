// Package wirehold lets a connection's watch events share write calls.
//
// One change gives an event to thousands of watchers, and kube-apiserver's
// aggregator carries them to this server as streams of a few HTTP/2
// connections. k8s.io/apiserver's watch handler flushes after every event,
// and golang.org/x/net/http2's serve loop then writes the frame and, with
// nothing else queued, flushes the connection: one TLS record and one
// write call per event, and one read in kube-apiserver's proxy.
//
// A Conn (the server's listener wraps every accepted connection, under
// TLS) holds the bytes written to it while events are on their way to the
// watchers of that connection, and writes them in one call once the last
// of those watchers' handlers has flushed. The fan-out (pkg/watchmux)
// holds the connection for each event it hands a watcher; the watcher
// passes the hold to its handler's stream with the event; the handler's
// flush releases it (Stream). Nothing waits for a timer in the ordinary
// course: a connection whose holds do not end (a stream blocked by flow
// control) writes what it holds after MaxHold.
package wirehold
