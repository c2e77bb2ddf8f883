package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// slowWatcher opens an -A view watch straight to implicit-apiserver on a
// connection of its own that never reads after the response header (a
// 4 KiB receive buffer), then edits a global RoleBinding, each edit a
// measured round for the fleet, until implicit-apiserver closes the
// laggard (implicit_watch_slow_watchers_closed_total) or maxSlowEdits.
func (b *bench) slowWatcher(ctx context.Context, f *fleet, res *nResult) error {
	s := &res.Slow
	l, err := b.dyn.Resource(viewRoleBindings).Namespace(b.tenants[0]).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	closeConn, err := b.neverReadingWatch(ctx, "/apis/implicit.dev/v1alpha1/rolebindings?watch=1&resourceVersion="+l.GetResourceVersion())
	if err != nil {
		return fmt.Errorf("never-reading watch: %w", err)
	}
	defer closeConn()
	metric := "implicit_watch_slow_watchers_closed_total"
	before, err := b.implicitSrv.metrics(ctx, metric)
	if err != nil {
		return err
	}
	reconnects := f.reconnects.Load()
	name := globalName(1)
	for i := range maxSlowEdits {
		r := newRound(name, fmt.Sprintf("slow-%d", i+1), len(b.tenants), len(b.tenants), b.o.viewAll)
		last, all, err := f.measure(ctx, r, roundTimeout, func(ctx context.Context) error {
			_, err := b.kube.RbacV1().RoleBindings(globalNS).Patch(ctx, name, types.MergePatchType, labelPatch(r.value), metav1.PatchOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("edit %d with a never-reading watcher: %w", i+1, err)
		}
		s.Rounds = append(s.Rounds, max(last, all))
		s.Edits = i + 1
		after, err := b.implicitSrv.metrics(ctx, metric)
		if err != nil {
			return err
		}
		if s.Closed = after[metric] - before[metric]; s.Closed > 0 {
			break
		}
	}
	s.FleetReconnects = f.reconnects.Load() - reconnects
	fmt.Printf("  a never-reading -A watcher: closed as slow %.0f time(s) after %d edits (%d view events each); the fleet meanwhile: %s to the last watcher, %d reconnects\n",
		s.Closed, s.Edits, len(b.tenants), s.Rounds, s.FleetReconnects)
	b.prog.step("slow watcher N=%d: closed %.0f after %d edits", b.n, s.Closed, s.Edits)
	return nil
}

// neverReadingWatch sends GET path over HTTP/1.1 on a TLS connection of its
// own with the admin's client certificate, reads the status line, and then
// nothing more. It returns the closer of the connection.
func (b *bench) neverReadingWatch(ctx context.Context, path string) (func(), error) {
	cfg := rest.CopyConfig(b.cfg)
	cfg.Host = b.implicit.URL()
	cfg.CAData, cfg.CAFile, cfg.Insecure = nil, "", true
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	tlsCfg.NextProtos = []string{"http/1.1"}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	d := &net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := (&tls.Dialer{NetDialer: d, Config: tlsCfg}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: application/json\r\n\r\n", path, u.Host)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	status, err := bufio.NewReaderSize(conn, 16).ReadString('\n')
	if err != nil {
		conn.Close()
		return nil, err
	}
	if !strings.Contains(status, " 200 ") {
		conn.Close()
		return nil, fmt.Errorf("watch answered %q", strings.TrimSpace(status))
	}
	return func() { conn.Close() }, nil
}
