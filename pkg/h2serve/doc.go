// Package h2serve serves the secure port with this server's own
// http.Server, so that its HTTP/2 write scheduler can be chosen.
//
// kube-apiserver's aggregator carries every watch of the views as a stream
// of a few HTTP/2 connections, and its availability check shares them: the
// more streams a connection may carry (--http2-max-streams-per-connection),
// the fewer connections a reconnect storm makes kube-apiserver dial and the
// better the check gets through (docs/benchmarks.md, "Scale edges").
// golang.org/x/net/http2's default write scheduler (round robin) walks
// every open stream of a connection for each frame it writes, idle watches
// included, so many streams per connection cost fan-out CPU. Its random
// write scheduler keeps only the streams with frames queued. But
// k8s.io/apiserver's SecureServingInfo.Serve builds its http2.Server
// itself, with no way to set NewWriteScheduler.
//
// Park takes the real listener out of the SecureServingInfo and gives it a
// parked one that never yields a connection, so k8s.io/apiserver's server
// and its graceful-termination sequence run unchanged around an idle
// listener. The first Accept on it (k8s's server starting) starts this
// package's server on the real listener with the same settings as k8s's
// (timeouts, header and frame sizes, streams per connection, the TLS
// configuration with dynamic certificates and client CAs) and the chosen
// write scheduler. k8s's http.Server.Shutdown closing the parked listener
// shuts this server down (GOAWAY on each connection, then waiting for the
// connections to end, bounded by the same shutdown timeout); the parked
// Accept returns only then, so k8s's Shutdown, and with it the process's
// exit, waits for this server's.
package h2serve
