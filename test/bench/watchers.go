package main

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// round is one expected change: the object name whose label labelBench
// becomes value. Each namespace watcher counts itself once; the -A watcher
// counts each tenant namespace once.
type round struct {
	name, value string

	left    atomic.Int64
	done    chan struct{}
	lastAt  atomic.Int64 // unix nanos of the last namespace watcher's event
	allLeft atomic.Int64
	allDone chan struct{}
	allAt   atomic.Int64
}

func newRound(name, value string, watchers, namespaces int, withAll bool) *round {
	r := &round{name: name, value: value, done: make(chan struct{}), allDone: make(chan struct{})}
	r.left.Store(int64(watchers))
	r.allLeft.Store(int64(namespaces))
	if !withAll {
		close(r.allDone)
	}
	return r
}

// fleet is one watcher per namespace (plus optionally one for all
// namespaces) on one resource, started from a list's resourceVersion and
// spread over a few rest clients, each with its own HTTP/2 connection.
type fleet struct {
	gvr     schema.GroupVersionResource
	current atomic.Pointer[round]
	tenants map[string]bool

	open       int
	reconnects atomic.Int64
	errors     atomic.Int64           // error events (410 Gone included)
	events     atomic.Int64           // events received by every watcher
	unmatched  atomic.Pointer[string] // the last MODIFIED that matched no round, for diagnosis
	wg         sync.WaitGroup
	cancel     context.CancelFunc
}

// clients returns n dynamic clients that do not share a transport (a custom
// Dial makes client-go skip its transport cache).
func (b *bench) clients(n int) ([]dynamic.Interface, error) {
	out := make([]dynamic.Interface, n)
	for i := range out {
		cfg := rest.CopyConfig(b.cfg)
		d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		cfg.Dial = d.DialContext
		c, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// startFleet watches gvr in every namespace of namespaces (and across all
// namespaces when withAll), with bounded concurrency, from the
// resourceVersion of one list of the first namespace: the watches start
// from now, without each listing its own namespace first (an -A list at
// N = 10,000 and G = 100 would be a million items).
func (b *bench) startFleet(ctx context.Context, gvr schema.GroupVersionResource, namespaces []string, withAll bool) (*fleet, error) {
	start := time.Now()
	l, err := b.dyn.Resource(gvr).Namespace(namespaces[0]).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list %s in %q: %w", gvr.Resource, namespaces[0], err)
	}
	rv := l.GetResourceVersion()
	nClients := (len(namespaces) + b.o.watchersPerConn - 1) / b.o.watchersPerConn
	cs, err := b.clients(nClients + 1)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &fleet{gvr: gvr, cancel: cancel, tenants: map[string]bool{}}
	for _, ns := range namespaces {
		f.tenants[ns] = true
	}
	if withAll {
		if err := f.watch(ctx, cs[nClients], "", true, rv); err != nil {
			f.stop()
			return nil, err
		}
	}
	// The watches live on the fleet's context, not on parallel's, which
	// ends when every watch is started.
	fleetCtx := ctx
	err = parallel(ctx, len(namespaces), workers, func(_ context.Context, i int) error {
		return f.watch(fleetCtx, cs[i%nClients], namespaces[i], false, rv)
	})
	if err != nil {
		f.stop()
		return nil, err
	}
	f.open = len(namespaces) + btoi(withAll)
	fmt.Printf("  %d watchers on %s (+%d -A) over %d clients started in %s\n", len(namespaces), gvr.GroupResource(), btoi(withAll), nClients, time.Since(start).Round(time.Millisecond))
	return f, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// watch follows namespace ("" for all) from resourceVersion rv,
// reconnecting from the last version seen if the server closes the watch.
func (f *fleet) watch(ctx context.Context, c dynamic.Interface, namespace string, all bool, rv string) error {
	res := c.Resource(f.gvr).Namespace(namespace)
	w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	if err != nil {
		return fmt.Errorf("watch %s in %q: %w", f.gvr.Resource, namespace, err)
	}
	f.wg.Go(func() {
		counted := ""               // the last round value this namespace watcher counted
		seen := map[string]string{} // -A: namespace -> last round value counted
		for {
			for ev := range w.ResultChan() {
				obj, ok := ev.Object.(*unstructured.Unstructured)
				if !ok || ev.Type == watch.Error {
					f.errors.Add(1)
					continue // the watch closes next
				}
				rv = obj.GetResourceVersion()
				if ev.Type == watch.Bookmark {
					continue
				}
				f.events.Add(1)
				if ev.Type != watch.Modified {
					continue
				}
				r := f.current.Load()
				if r == nil || obj.GetName() != r.name || obj.GetLabels()[labelBench] != r.value {
					desc := fmt.Sprintf("%s/%s labels %v (watching %q)", obj.GetNamespace(), obj.GetName(), obj.GetLabels(), namespace)
					f.unmatched.Store(&desc)
					continue
				}
				now := time.Now().UnixNano()
				if all {
					ns := obj.GetNamespace()
					if !f.tenants[ns] || seen[ns] == r.value {
						continue
					}
					seen[ns] = r.value
					if r.allLeft.Add(-1) == 0 {
						r.allAt.Store(now)
						close(r.allDone)
					}
					continue
				}
				if counted == r.value {
					continue
				}
				counted = r.value
				if r.left.Add(-1) == 0 {
					r.lastAt.Store(now)
					close(r.done)
				}
			}
			w.Stop()
			if ctx.Err() != nil {
				return
			}
			f.reconnects.Add(1)
			for {
				if w, err = res.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}); err == nil {
					break
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	})
	return nil
}

// measure installs r, calls change and waits for every watcher of r. It
// returns the time to the last namespace watcher and to the -A watcher.
func (f *fleet) measure(ctx context.Context, r *round, timeout time.Duration, change func(ctx context.Context) error) (last, all time.Duration, err error) {
	f.current.Store(r)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	if err := change(ctx); err != nil {
		return 0, 0, err
	}
	for _, ch := range []chan struct{}{r.done, r.allDone} {
		select {
		case <-ch:
		case <-ctx.Done():
			unmatched := "none"
			if u := f.unmatched.Load(); u != nil {
				unmatched = *u
			}
			return 0, 0, fmt.Errorf("%d namespace watchers and %d namespaces of the -A watcher still without %s=%s after %s (events %d, reconnects %d, last unmatched MODIFIED %s): %w",
				r.left.Load(), max(0, r.allLeft.Load()), labelBench, r.value, timeout, f.events.Load(), f.reconnects.Load(), unmatched, ctx.Err())
		}
	}
	last = time.Duration(r.lastAt.Load() - start.UnixNano())
	if at := r.allAt.Load(); at != 0 {
		all = time.Duration(at - start.UnixNano())
	}
	return last, all, nil
}

func (f *fleet) stop() {
	f.cancel()
	f.wg.Wait()
}
