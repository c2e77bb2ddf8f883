package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
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

// fleetSpec says what a fleet watches. Every watcher starts from the
// resourceVersion of one list of list (informer-style: list, then watch
// from the list's version), without each listing its own path first (an -A
// list at N = 10,000 and G = 100 would be a million items).
type fleetSpec struct {
	what          string   // for messages
	list          string   // the path listed once for the resourceVersion
	fieldSelector string   // of the list and of every watch ("" none)
	paths         []string // one watcher each
	allPath       string   // an -A watcher counting each tenant namespace once ("" none)
	noSubjects    bool     // the objects have no subjects to check (Flunders)
	// listEach: every watcher lists its own path (with the fieldSelector)
	// and watches from that list's resourceVersion, as an informer per
	// namespace does, rather than all from the one list above.
	listEach bool
	// cfg is who the watchers are (nil: admin, b.cfg).
	cfg *rest.Config
}

// viewFleet is one view watcher per namespace, and one -A, on
// rolebindings.implicit.dev or (native) on rolebindings.rbac.authorization.k8s.io.
func viewFleet(gvr schema.GroupVersionResource, namespaces []string, withAll bool) fleetSpec {
	base := "/apis/" + gvr.Group + "/" + gvr.Version
	s := fleetSpec{what: gvr.GroupResource().String(), list: base + "/namespaces/" + namespaces[0] + "/" + gvr.Resource}
	for _, ns := range namespaces {
		s.paths = append(s.paths, base+"/namespaces/"+ns+"/"+gvr.Resource)
	}
	if withAll {
		s.allPath = base + "/" + gvr.Resource
	}
	return s
}

// sourceFleet is n native watchers of the one source RoleBinding name in
// the global namespace (a fieldSelector on metadata.name), served by
// kube-apiserver's watch cache: the native fan-out of the same edit.
func sourceFleet(name string, n int) fleetSpec {
	path := "/apis/rbac.authorization.k8s.io/v1/namespaces/" + globalNS + "/rolebindings"
	s := fleetSpec{what: fmt.Sprintf("rolebindings.rbac.authorization.k8s.io %s/%s (watch cache)", globalNS, name), list: path, fieldSelector: "metadata.name=" + name}
	for range n {
		s.paths = append(s.paths, path)
	}
	return s
}

// fleet is the watchers of one fleetSpec, spread over a few clients, each
// with its own HTTP/2 connection, started from one list's resourceVersion.
type fleet struct {
	spec    fleetSpec
	current atomic.Pointer[round]
	tenants map[string]bool

	open       int
	reconnects atomic.Int64
	errors     atomic.Int64           // error events (410 Gone included)
	events     atomic.Int64           // events received by every watcher
	unmatched  atomic.Pointer[string] // the last MODIFIED that matched no round, for diagnosis
	wg         sync.WaitGroup
	cancel     context.CancelFunc

	// Each watcher's list (listEach) and watch request until its response
	// headers, while the fleet opens.
	openMu         sync.Mutex
	lists, watches samples
}

// watchClient is one HTTP/2 connection to kube-apiserver, as admin.
type watchClient struct {
	host string
	http *http.Client
	// retries, when set, counts the requests sent again after a 429 (the
	// burst mode's clients retry them, as client-go does; others fail).
	retries *atomic.Int64
}

// clients returns n clients that do not share a transport (a custom Dial
// makes client-go skip its transport cache).
func (b *bench) clients(n int) ([]*watchClient, error) { return b.clientsAs(nil, n) }

// clientsAs is clients as the user of as (nil: admin).
func (b *bench) clientsAs(as *rest.Config, n int) ([]*watchClient, error) {
	if as == nil {
		as = b.cfg
	}
	out := make([]*watchClient, n)
	for i := range out {
		cfg := rest.CopyConfig(as)
		d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		cfg.Dial = d.DialContext
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, err
		}
		out[i] = &watchClient{host: strings.TrimSuffix(cfg.Host, "/"), http: hc}
	}
	return out, nil
}

// get sends GET path?query as JSON and returns the body of a 200.
func (c *watchClient) get(ctx context.Context, path string, query url.Values) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.host+path+"?"+query.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err == nil && c.retries != nil {
		resp, err = retryAfter429(ctx, c.http, req, resp, c.retries)
	}
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return resp.Body, nil
}

// listVersion lists path and returns the list's resourceVersion; the
// items are skipped by the decoder, not built.
func (c *watchClient) listVersion(ctx context.Context, path string, query url.Values) (string, error) {
	body, err := c.get(ctx, path, query)
	if err != nil {
		return "", err
	}
	defer body.Close()
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.NewDecoder(body).Decode(&l); err != nil {
		return "", err
	}
	return l.Metadata.ResourceVersion, nil
}

// minimalEvent is all a watcher decodes of a watch event, the same on every
// fleet: the type, the object's name, namespace (for the -A watcher),
// resourceVersion (to resume), the bench label and the subjects (the first
// is checked). encoding/json skips the rest without building it.
type minimalEvent struct {
	Type   string `json:"type"`
	Object struct {
		Metadata struct {
			Name            string `json:"name"`
			Namespace       string `json:"namespace"`
			ResourceVersion string `json:"resourceVersion"`
			Labels          struct {
				Run string `json:"bench.implicit.dev/run"`
			} `json:"labels"`
		} `json:"metadata"`
		Subjects []struct {
			Name string `json:"name"`
		} `json:"subjects"`
	} `json:"object"`
}

// benchSubject is the first subject of the bench RoleBinding name.
func benchSubject(name string) string { return "bench-user-" + name }

// startFleet lists spec.list once and starts every watcher of spec from
// the list's resourceVersion, with bounded concurrency, over
// ceil(watchers / -watchers-per-client) connections (plus one for -A).
func (b *bench) startFleet(ctx context.Context, spec fleetSpec, namespaces []string) (*fleet, error) {
	start := time.Now()
	nClients := (len(spec.paths) + b.o.watchersPerConn - 1) / b.o.watchersPerConn
	cs, err := b.clientsAs(spec.cfg, nClients+1)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if spec.fieldSelector != "" {
		q.Set("fieldSelector", spec.fieldSelector)
	}
	rv, err := cs[0].listVersion(ctx, spec.list, q)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", spec.what, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &fleet{spec: spec, cancel: cancel, tenants: map[string]bool{}}
	for _, ns := range namespaces {
		f.tenants[ns] = true
	}
	withAll := spec.allPath != ""
	if withAll {
		if err := f.watch(ctx, cs[nClients], spec.allPath, true, rv); err != nil {
			f.stop()
			return nil, err
		}
	}
	// The watches live on the fleet's context, not on parallel's, which
	// ends when every watch is started.
	fleetCtx := ctx
	err = parallel(ctx, len(spec.paths), workers, func(_ context.Context, i int) error {
		from := rv
		t0 := time.Now()
		if spec.listEach {
			var err error
			if from, err = cs[i%nClients].listVersion(fleetCtx, spec.paths[i], q); err != nil {
				return fmt.Errorf("list %s: %w", spec.paths[i], err)
			}
		}
		t1 := time.Now()
		if err := f.watch(fleetCtx, cs[i%nClients], spec.paths[i], false, from); err != nil {
			return err
		}
		f.openMu.Lock()
		f.lists, f.watches = append(f.lists, t1.Sub(t0)), append(f.watches, time.Since(t1))
		f.openMu.Unlock()
		return nil
	})
	if err != nil {
		f.stop()
		return nil, err
	}
	f.open = len(spec.paths) + btoi(withAll)
	fmt.Printf("  %d watchers on %s (+%d -A) over %d clients started in %s\n", len(spec.paths), spec.what, btoi(withAll), nClients, time.Since(start).Round(time.Millisecond))
	return f, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// watch follows path from resourceVersion rv, reconnecting from the last
// version seen if the server closes the watch. all: an -A watcher.
func (f *fleet) watch(ctx context.Context, c *watchClient, path string, all bool, rv string) error {
	query := func() url.Values {
		q := url.Values{"watch": {"1"}, "resourceVersion": {rv}, "allowWatchBookmarks": {"true"}}
		if f.spec.fieldSelector != "" {
			q.Set("fieldSelector", f.spec.fieldSelector)
		}
		return q
	}
	body, err := c.get(ctx, path, query())
	if err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	f.wg.Go(func() {
		counted := ""               // the last round value this namespace watcher counted
		seen := map[string]string{} // -A: namespace -> last round value counted
		follow(ctx, c, path, query, body, &f.reconnects, func(ev *minimalEvent) {
			if f.event(ev, all, &counted, seen) {
				rv = ev.Object.Metadata.ResourceVersion
			}
		})
	})
	return nil
}

// event counts one decoded event for the current round. It returns whether
// the event carries a resourceVersion to resume from.
func (f *fleet) event(ev *minimalEvent, all bool, counted *string, seen map[string]string) bool {
	switch ev.Type {
	case "ERROR":
		f.errors.Add(1)
		return false // the watch closes next
	case "BOOKMARK":
		return true
	}
	f.events.Add(1)
	if ev.Type != "MODIFIED" {
		return true
	}
	meta := &ev.Object.Metadata
	r := f.current.Load()
	if r == nil || meta.Name != r.name || meta.Labels.Run != r.value || !f.subjectsMatch(ev, r) {
		desc := fmt.Sprintf("%s/%s label %q subjects %v", meta.Namespace, meta.Name, meta.Labels.Run, ev.Object.Subjects)
		f.unmatched.Store(&desc)
		return true
	}
	now := time.Now().UnixNano()
	if all {
		ns := meta.Namespace
		if !f.tenants[ns] || seen[ns] == r.value {
			return true
		}
		seen[ns] = r.value
		if r.allLeft.Add(-1) == 0 {
			r.allAt.Store(now)
			close(r.allDone)
		}
		return true
	}
	if *counted == r.value {
		return true
	}
	*counted = r.value
	if r.left.Add(-1) == 0 {
		r.lastAt.Store(now)
		close(r.done)
	}
	return true
}

// subjectsMatch is whether the event's first subject is r's bench subject
// (always, for a fleet of objects without subjects).
func (f *fleet) subjectsMatch(ev *minimalEvent, r *round) bool {
	if f.spec.noSubjects {
		return true
	}
	return len(ev.Object.Subjects) > 0 && ev.Object.Subjects[0].Name == benchSubject(r.name)
}

// armed is a round installed on a fleet.
type armed struct {
	f *fleet
	r *round
}

// measureAll installs each round on its fleet, calls change once and waits
// until every fleet has its round. It returns when change was called.
func measureAll(ctx context.Context, timeout time.Duration, change func(ctx context.Context) error, rounds ...armed) (time.Time, error) {
	for _, a := range rounds {
		a.f.current.Store(a.r)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	if err := change(ctx); err != nil {
		return start, err
	}
	for _, a := range rounds {
		f, r := a.f, a.r
		for _, ch := range []chan struct{}{r.done, r.allDone} {
			select {
			case <-ch:
			case <-ctx.Done():
				unmatched := "none"
				if u := f.unmatched.Load(); u != nil {
					unmatched = *u
				}
				return start, fmt.Errorf("%s: %d watchers and %d namespaces of the -A watcher still without %s=%s after %s (events %d, reconnects %d, errors %d, last unmatched MODIFIED %s): %w",
					f.spec.what, r.left.Load(), max(0, r.allLeft.Load()), labelBench, r.value, timeout, f.events.Load(), f.reconnects.Load(), f.errors.Load(), unmatched, ctx.Err())
			}
		}
	}
	return start, nil
}

// since is the time from start to the unix nanos at (0 when unset).
func since(start time.Time, at int64) time.Duration {
	if at == 0 {
		return 0
	}
	return time.Duration(at - start.UnixNano())
}

// measure installs r, calls change and waits for every watcher of r. It
// returns the time to the last namespace watcher and to the -A watcher.
func (f *fleet) measure(ctx context.Context, r *round, timeout time.Duration, change func(ctx context.Context) error) (last, all time.Duration, err error) {
	start, err := measureAll(ctx, timeout, change, armed{f, r})
	if err != nil {
		return 0, 0, err
	}
	return since(start, r.lastAt.Load()), since(start, r.allAt.Load()), nil
}

func (f *fleet) stop() {
	f.cancel()
	f.wg.Wait()
}

// follow decodes the watch events of body as E and hands each to handle,
// until ctx ends; when the server closes the watch it reopens path with
// query() (which reads the last resourceVersion handle kept), counting the
// reconnection, and retries every 100ms while that fails.
func follow[E any](ctx context.Context, c *watchClient, path string, query func() url.Values, body io.ReadCloser, reconnects *atomic.Int64, handle func(*E)) {
	for {
		dec := json.NewDecoder(body)
		for {
			var ev E
			if err := dec.Decode(&ev); err != nil {
				break // the watch closed (or the watcher stopped)
			}
			handle(&ev)
		}
		body.Close()
		if ctx.Err() != nil {
			return
		}
		reconnects.Add(1)
		for {
			var err error
			if body, err = c.get(ctx, path, query()); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}
