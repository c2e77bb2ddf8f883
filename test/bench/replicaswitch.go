package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// The replica switch (issue 31): what it costs the server and the client
// when a client's watch moves to an implicit-apiserver that did not issue
// its version (another replica, or the same one restarted: a new process
// has no history), resumed from the client's last version, against the
// same scope relisted. For each scope, on its own restart:
//
//   - the clients list and watch (informer-style) through kube-apiserver;
//   - implicit-apiserver is stopped (SIGTERM): the watches end, each client
//     keeps its last version;
//   - while it is down: an edit of global-0 (every namespace's view
//     changes), a delete of another global binding, and an edit of a local
//     binding in one tenant;
//   - a new implicit-apiserver process starts (same flags and port);
//   - resume: every client watches from its last version until it has the
//     three writes (time, bytes on the wire and decoded, events), with
//     implicit-apiserver's and kube-apiserver's CPU and memory over it;
//   - relist: implicit-apiserver restarts once more, then every client
//     lists its scope afresh and watches from the list's version (time,
//     bytes, items), with the servers' CPU and memory over it: a relist
//     after a restart pays the same reconnection as the resume; each
//     client's state after the resume must equal that list (names and
//     source resourceVersions).

const (
	// switchLocal is the local binding edited in the first tenant.
	switchLocal = "local-0"
	// sourceRVAnnotation is, on a view item, the resourceVersion of the
	// source it was merged from.
	sourceRVAnnotation = "implicit.dev/source-resource-version"
	// switchWatchSeconds is the resume's and the pre-restart watches'
	// timeoutSeconds: longer than any phase.
	switchWatchSeconds = 1800
	// retryFor bounds the retries of a watch answered other than 200 (503
	// while the aggregator marks the APIService unavailable: it probes
	// implicit-apiserver, which may be too busy to answer in time).
	retryFor = 5 * time.Minute
)

// switchResult is one run of the replica switch.
type switchResult struct {
	N            int `json:"n"`
	G            int `json:"g"`
	Orgs         int `json:"orgs"`
	SetupTime    time.Duration
	Scopes       []*scopeResult `json:"scopes"`
	Total        time.Duration  `json:"total"`
	LoadBefore   string         `json:"loadBefore"`
	LoadAfter    string         `json:"loadAfter"`
	Failed       []string       `json:"failed,omitempty"`
	WatchersPerC int            `json:"watchersPerConnection"`
}

// scopeResult is one scope's restart: the resume and the relist.
type scopeResult struct {
	Scope   string `json:"scope"` // "-A" or "one namespace"
	Clients int    `json:"clients"`
	// The first list (before the restart), for the scale of the scope.
	FirstListItems int           `json:"firstListItems"`
	FirstList      time.Duration `json:"firstList"`
	// The old process's watch history just before it stopped, and its heap.
	HistoryEvents float64   `json:"historyEvents"`
	HistoryBytes  float64   `json:"historyBytes"`
	OldMem        memSample `json:"oldMem"`
	// Stop: SIGTERM to exit. Start: the new process's start until ready,
	// and its CPU to get there.
	Stop, Start      time.Duration
	Serving          time.Duration // from the start until a view is listed
	StartCPU         time.Duration
	DistinctRVs      int `json:"distinctVersions"` // versions the clients resumed from
	Resume           costs
	Relist           costs
	MemReady         memSample `json:"memReady"` // new process, ready, before the resume
	MemAfter         memSample `json:"memAfterResume"`
	MemAfterList     memSample `json:"memAfterRelist"`
	ResumedFromSrc   float64   `json:"resumedFromSources"`
	ResumeFailures   float64   `json:"resumeFailures"`
	NewHistoryEvents float64   `json:"newHistoryEvents"`
	NewHistoryBytes  float64   `json:"newHistoryBytes"`
	Mismatched       int       `json:"mismatched"` // clients whose state differs from a fresh list
	Mismatches       []string  `json:"mismatches,omitempty"`
}

// costs are one way of catching up (resume or relist) over all clients of a scope.
type costs struct {
	Times                        samples       `json:"times"` // per client, from the start to caught up
	Last                         time.Duration `json:"last"`  // to the last client
	Wire                         int64         `json:"wireBytes"`
	Body                         int64         `json:"bodyBytes"` // decoded (after gzip) response bytes
	Events                       int64         `json:"events"`    // watch events (not bookmarks) or list items
	Bookmarks                    int64         `json:"bookmarks,omitempty"`
	Retries                      int64         `json:"retries,omitempty"` // requests answered other than 200 and sent again
	Errors                       []string      `json:"errors,omitempty"`
	CPUImplicit, CPUKube         time.Duration
	PeakRSSImplicit, PeakRSSKube float64
	// For a relist, Times are until the watch from the list's version is
	// open (an informer watches again), Listed until the list is decoded
	// and Received until its last byte, per client.
	Received samples `json:"received,omitempty"`
	Listed   samples `json:"listed,omitempty"`
}

// countingConns counts the bytes read from the connections it dials.
type countingConns struct{ read atomic.Int64 }

type countedConn struct {
	net.Conn
	c *countingConns
}

func (c countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.c.read.Add(int64(n))
	return n, err
}

// countingClients are n clients (one HTTP/2 connection each) whose
// received bytes on the wire are counted together.
func (b *bench) countingClients(n int) ([]*watchClient, *countingConns, error) {
	cc := &countingConns{}
	out := make([]*watchClient, n)
	for i := range out {
		cfg := rest.CopyConfig(b.cfg)
		d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countedConn{Conn: conn, c: cc}, nil
		}
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return nil, nil, err
		}
		out[i] = &watchClient{host: strings.TrimSuffix(cfg.Host, "/"), http: hc}
	}
	return out, cc, nil
}

// switchItem is what a client decodes of a view item.
type switchItem struct {
	Metadata struct {
		Name            string `json:"name"`
		Namespace       string `json:"namespace"`
		ResourceVersion string `json:"resourceVersion"`
		Annotations     struct {
			SourceRV string `json:"implicit.dev/source-resource-version"`
		} `json:"annotations"`
		Labels struct {
			Run string `json:"bench.implicit.dev/run"`
		} `json:"labels"`
	} `json:"metadata"`
}

func (it *switchItem) key() string { return it.Metadata.Namespace + "/" + it.Metadata.Name }

// switchClient is one informer-style client of one scope (a namespace's
// view, or every namespace's).
type switchClient struct {
	path  string
	conn  *watchClient
	items map[string]string // namespace/name -> source resourceVersion
	rv    string
	body  atomic.Int64

	// The resume's expected writes: key -> the label value it must carry
	// ("" for a delete); the client has caught up when none is left.
	pending map[string]string
	// opened is called once the watch's response is 200 (nil: nothing).
	opened                     func()
	events, bookmarks, retries int64
	took                       time.Duration
}

// countingBody counts the bytes read from a response body.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// do sends GET path?query and returns the response (any status), its body counted.
func (c *switchClient) do(ctx context.Context, query url.Values) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.conn.host+c.path+"?"+query.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.conn.http.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body = countingBody{ReadCloser: resp.Body, n: &c.body}
	return resp, nil
}

// list lists the scope: the items (key -> source resourceVersion), the
// list's version, the time to the last byte and to the decoded items.
func (c *switchClient) list(ctx context.Context) (items map[string]string, rv string, received, decoded time.Duration, err error) {
	start := time.Now()
	resp, err := c.do(ctx, nil)
	if err != nil {
		return nil, "", 0, 0, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, "", 0, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", 0, 0, fmt.Errorf("GET %s: %s: %s", c.path, resp.Status, bytes.TrimSpace(body[:min(len(body), 512)]))
	}
	received = time.Since(start)
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
		Items []switchItem `json:"items"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return nil, "", 0, 0, err
	}
	items = make(map[string]string, len(l.Items))
	for i := range l.Items {
		items[l.Items[i].key()] = l.Items[i].Metadata.Annotations.SourceRV
	}
	return items, l.Metadata.ResourceVersion, received, time.Since(start), nil
}

// watchEvent is what a client decodes of a watch event.
type watchEvent struct {
	Type   string     `json:"type"`
	Object switchItem `json:"object"`
}

// statusEvent is an ERROR event's object.
type statusEvent struct {
	Object struct {
		Code    int    `json:"code"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"object"`
}

// watch watches from c.rv, applies every event to c.items and keeps c.rv,
// until the stream ends, ctx ends, or (stopWhenDone) no write is pending.
// A response other than 200 is sent again after a pause (counted) until
// retryUntil.
func (c *switchClient) watch(ctx context.Context, stopWhenDone bool, retryUntil time.Time) error {
	defer func() {
		// Opened or failed: either way no longer opening.
		if c.opened != nil {
			c.opened()
			c.opened = nil
		}
	}()
	q := url.Values{"watch": {"true"}, "allowWatchBookmarks": {"true"}, "timeoutSeconds": {strconv.Itoa(switchWatchSeconds)}}
	var resp *http.Response
	for {
		q.Set("resourceVersion", c.rv)
		var err error
		resp, err = c.do(ctx, q)
		if err == nil && resp.StatusCode == http.StatusOK {
			break
		}
		if err == nil {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			err = fmt.Errorf("watch %s from %s: %s: %s", c.path, c.rv, resp.Status, bytes.TrimSpace(msg))
		}
		if ctx.Err() != nil || time.Now().After(retryUntil) {
			return err
		}
		c.retries++
		time.Sleep(100 * time.Millisecond)
	}
	defer resp.Body.Close()
	if c.opened != nil {
		c.opened()
		c.opened = nil
	}
	dec := json.NewDecoder(resp.Body)
	for {
		if stopWhenDone && len(c.pending) == 0 {
			return nil
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil // the stream ended (the server stopped)
			}
			return nil
		}
		var ev watchEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return err
		}
		switch ev.Type {
		case "BOOKMARK":
			c.bookmarks++
			c.rv = ev.Object.Metadata.ResourceVersion
			continue
		case "ERROR":
			var st statusEvent
			_ = json.Unmarshal(raw, &st)
			return fmt.Errorf("watch %s from %s: ERROR event %d %s: %s", c.path, c.rv, st.Object.Code, st.Object.Reason, st.Object.Message)
		}
		c.events++
		c.rv = ev.Object.Metadata.ResourceVersion
		key := ev.Object.key()
		if ev.Type == "DELETED" {
			delete(c.items, key)
			if want, ok := c.pending[key]; ok && want == "" {
				delete(c.pending, key)
			}
			continue
		}
		c.items[key] = ev.Object.Metadata.Annotations.SourceRV
		if want, ok := c.pending[key]; ok && want != "" && ev.Object.Metadata.Labels.Run == want {
			delete(c.pending, key)
		}
	}
}

// switchWrites are the writes made while implicit-apiserver is down.
type switchWrites struct {
	value   string // global-0's and the local binding's new label
	deleted string // the global binding deleted
	local   string // namespace of the edited local binding
}

// expect sets c.pending from what the client holds: every namespace
// holding global-0 gets its edit, every one holding the deleted binding its
// delete, the local binding its edit. The native namespace holds twins
// that are not written.
func (c *switchClient) expect(w switchWrites) {
	c.pending = map[string]string{}
	for key := range c.items {
		ns, name, _ := strings.Cut(key, "/")
		switch {
		case ns == nativeNS:
		case name == globalName(0):
			c.pending[key] = w.value
		case name == w.deleted:
			c.pending[key] = ""
		case ns == w.local && name == switchLocal:
			c.pending[key] = w.value
		}
	}
}

// replicaSwitch runs the replica switch at each N, on a control plane of its
// own, with the last -globals value.
func replicaSwitch(ctx context.Context, o options) error {
	start := time.Now()
	res := &results{
		Command: "go run ./test/bench " + strings.Join(os.Args[1:], " "),
		Machine: machine(),
		Started: start,
	}
	prog := newProgress(os.Stderr, len(o.namespaces)*(1+2*len(o.switchScopes)))
	var failed []string
	for _, n := range o.namespaces {
		r, err := runSwitch(ctx, o, n, prog)
		if r != nil {
			res.Switch = append(res.Switch, r)
			failed = append(failed, r.Failed...)
		}
		if err != nil {
			res.Wall = time.Since(start)
			_ = res.write(o)
			return fmt.Errorf("N=%d: %w", n, err)
		}
	}
	res.Wall = time.Since(start)
	prog.show("done")
	if err := res.write(o); err != nil {
		return err
	}
	fmt.Printf("\nreplica switch finished in %s; results in %s\n", res.Wall.Round(time.Second), o.outDir)
	if len(failed) > 0 {
		return fmt.Errorf("CORRECTNESS FAILURE: %s", strings.Join(failed, "; "))
	}
	return nil
}

func loadAverage() string {
	body, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(body))
	return strings.Join(f[:min(3, len(f))], " ")
}

func runSwitch(ctx context.Context, o options, n int, prog *progress) (*switchResult, error) {
	g := o.globals[len(o.globals)-1]
	if g < 2+len(o.switchScopes) {
		return nil, fmt.Errorf("-globals %d: the replica switch deletes one global binding per scope and edits global-0: want at least %d", g, 2+len(o.switchScopes))
	}
	work, err := os.MkdirTemp("", "implicit-switch-")
	if err != nil {
		return nil, err
	}
	res := &switchResult{N: n, G: g, Orgs: orgCount(n), LoadBefore: loadAverage(), WatchersPerC: o.watchersPerConn}
	fmt.Printf("\n== replica switch: N=%d tenant namespaces (+%d orgs), G=%d global RoleBindings; load average %s; work dir %s\n", n, orgCount(n), g, res.LoadBefore, work)
	prog.show("starting the control plane N=%d", n)
	start := time.Now()
	b, err := startBench(ctx, o, n, prog, work)
	if err != nil {
		fmt.Printf("logs kept in %s\n", filepath.Join(work, "logs"))
		return nil, err
	}
	ok := false
	defer func() {
		b.cp.Stop()
		if ok && !o.keepWorkDir {
			os.RemoveAll(work)
		} else {
			fmt.Printf("logs kept in %s\n", filepath.Join(work, "logs"))
		}
	}()
	o.globals = []int{g}
	b.o = o
	if err := b.setup(ctx); err != nil {
		return res, fmt.Errorf("setup: %w", err)
	}
	local := b.tenants[0]
	if _, err := b.kube.RbacV1().RoleBindings(local).Create(ctx, roleBinding(switchLocal), metav1.CreateOptions{}); err != nil {
		return res, err
	}
	res.SetupTime = time.Since(start)
	prog.step("setup done N=%d", n)
	for i, scope := range o.switchScopes {
		w := switchWrites{value: fmt.Sprintf("switch-%d", i+1), deleted: globalName(g - 1 - i), local: local}
		sr, err := b.switchScope(ctx, scope, w)
		if sr != nil {
			res.Scopes = append(res.Scopes, sr)
			if sr.Mismatched > 0 {
				res.Failed = append(res.Failed, fmt.Sprintf("N=%d %s: %d of %d clients differ from a fresh list after the resume", n, sr.Scope, sr.Mismatched, sr.Clients))
			}
		}
		if err != nil {
			return res, fmt.Errorf("%s: %w\n%s", scope, err, b.implicit.LogTail(20))
		}
	}
	res.Total = time.Since(start)
	res.LoadAfter = loadAverage()
	prog.step("N=%d done in %s", n, res.Total.Round(time.Second))
	ok = len(res.Failed) == 0
	return res, nil
}

// scopeAll and scopeOne name the two scopes.
const (
	scopeAll = "all"
	scopeOne = "one"
)

// newProcess restarts implicit-apiserver (SIGTERM, then a new process with
// the same flags and port) and waits until it serves views and its
// APIService is available again. start is until /readyz, serving until a
// view answers straight from its port.
func (b *bench) newProcess(ctx context.Context, base string) (start, serving time.Duration, err error) {
	begin := time.Now()
	if err := b.implicit.Restart(ctx); err != nil {
		return 0, 0, fmt.Errorf("restarting implicit-apiserver: %w", err)
	}
	start = time.Since(begin)
	// Ready (/readyz) is not yet serving views: wait until a view is
	// listed, straight from its port.
	last := b.tenants[len(b.tenants)-1]
	for {
		if _, err := b.implicitSrv.get(ctx, base+"/namespaces/"+last+"/"+viewRoleBindings.Resource); err == nil {
			break
		}
		if ctx.Err() != nil {
			return 0, 0, ctx.Err()
		}
		time.Sleep(20 * time.Millisecond)
	}
	serving = time.Since(begin)
	if err := b.cp.WaitAPIServiceAvailable(ctx); err != nil {
		return 0, 0, err
	}
	return start, serving, nil
}

// switchScope measures one restart with the clients of one scope.
func (b *bench) switchScope(ctx context.Context, scope string, w switchWrites) (*scopeResult, error) {
	base := "/apis/" + viewRoleBindings.Group + "/" + viewRoleBindings.Version
	var paths []string
	sr := &scopeResult{}
	switch scope {
	case scopeAll:
		sr.Scope = "-A"
		paths = []string{base + "/" + viewRoleBindings.Resource}
	default:
		sr.Scope = "one namespace"
		nf := b.o.switchFleet
		if nf <= 0 || nf > len(b.tenants) {
			nf = len(b.tenants)
		}
		for _, ns := range b.tenants[:nf] {
			paths = append(paths, base+"/namespaces/"+ns+"/"+viewRoleBindings.Resource)
		}
	}
	sr.Clients = len(paths)
	fmt.Printf("N=%d G=%d, %d %s client(s):\n", b.n, b.globals, len(paths), sr.Scope)
	conns, counter, err := b.countingClients((len(paths) + b.o.watchersPerConn - 1) / b.o.watchersPerConn)
	if err != nil {
		return nil, err
	}
	clients := make([]*switchClient, len(paths))
	for i, p := range paths {
		clients[i] = &switchClient{path: p, conn: conns[i/b.o.watchersPerConn]}
	}

	// The first lists, then a watch each until the server stops.
	b.prog.show("%s: first lists", sr.Scope)
	start := time.Now()
	var items atomic.Int64
	if err := parallel(ctx, len(clients), workers, func(ctx context.Context, i int) error {
		c := clients[i]
		var err error
		c.items, c.rv, _, _, err = c.list(ctx)
		items.Add(int64(len(c.items)))
		return err
	}); err != nil {
		return nil, fmt.Errorf("first lists: %w", err)
	}
	sr.FirstList, sr.FirstListItems = time.Since(start), int(items.Load())
	fmt.Printf("  first lists: %d items in %s\n", sr.FirstListItems, dur(sr.FirstList))
	watchCtx, cancelWatches := context.WithCancel(ctx)
	defer cancelWatches()
	var wg sync.WaitGroup
	watchErrs := make([]error, len(clients))
	var open sync.WaitGroup
	open.Add(len(clients))
	start = time.Now()
	for i, c := range clients {
		c.opened = open.Done
		wg.Go(func() { watchErrs[i] = c.watch(watchCtx, false, time.Now().Add(retryFor)) })
	}
	// Every watch open, and a moment of following.
	opened := make(chan struct{})
	go func() { open.Wait(); close(opened) }()
	select {
	case <-opened:
	case <-ctx.Done():
		return sr, ctx.Err()
	}
	fmt.Printf("  %d watches open in %s\n", len(clients), dur(time.Since(start)))
	time.Sleep(3 * time.Second)

	// The old process's history and memory, then its stop.
	if v, err := b.implicitSrv.metrics(ctx, "implicit_watch_history_events", "implicit_watch_history_bytes"); err == nil {
		sr.HistoryEvents, sr.HistoryBytes = v["implicit_watch_history_events"], v["implicit_watch_history_bytes"]
	}
	sr.OldMem = b.implicitSrv.memory(ctx)
	fmt.Printf("  old process before its stop: watch history %.0f events, about %s (estimate); %s\n", sr.HistoryEvents, mib(sr.HistoryBytes), sr.OldMem)
	b.prog.show("%s: stopping implicit-apiserver", sr.Scope)
	start = time.Now()
	if err := b.implicit.Stop(); err != nil {
		fmt.Printf("  (stopping implicit-apiserver: %v)\n", err)
	}
	sr.Stop = time.Since(start)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		cancelWatches()
		<-done
		fmt.Printf("  (some watches did not end within a minute of the stop: cancelled)\n")
	}
	for _, err := range watchErrs {
		if err != nil {
			return sr, fmt.Errorf("watch before the restart: %w", err)
		}
	}

	// The writes while it is down.
	if _, err := b.kube.RbacV1().RoleBindings(globalNS).Patch(ctx, globalName(0), types.MergePatchType, labelPatch(w.value), metav1.PatchOptions{}); err != nil {
		return sr, err
	}
	if err := b.kube.RbacV1().RoleBindings(globalNS).Delete(ctx, w.deleted, metav1.DeleteOptions{}); err != nil {
		return sr, err
	}
	if _, err := b.kube.RbacV1().RoleBindings(w.local).Patch(ctx, switchLocal, types.MergePatchType, labelPatch(w.value), metav1.PatchOptions{}); err != nil {
		return sr, err
	}
	b.globals--
	rvs := map[string]bool{}
	for _, c := range clients {
		c.expect(w)
		rvs[c.rv] = true
		c.events, c.bookmarks, c.retries = 0, 0, 0
	}
	sr.DistinctRVs = len(rvs)
	fmt.Printf("  stopped in %s; wrote %s (edit), deleted %s, edited %s/%s; the clients resume from %d distinct versions\n",
		dur(sr.Stop), globalName(0), w.deleted, w.local, switchLocal, sr.DistinctRVs)

	// A new process: no history.
	b.prog.show("%s: starting a new implicit-apiserver", sr.Scope)
	if sr.Start, sr.Serving, err = b.newProcess(ctx, base); err != nil {
		return sr, err
	}
	sr.StartCPU = b.implicitSrv.cpu()
	sr.MemReady = b.implicitSrv.memory(ctx)
	fmt.Printf("  new process ready in %s, serving views in %s (%s CPU); %s\n", dur(sr.Start), dur(sr.Serving), sr.StartCPU.Round(time.Millisecond), sr.MemReady)
	b.prog.step("%s: new implicit-apiserver ready", sr.Scope)

	// Resume.
	before, _ := b.implicitSrv.metrics(ctx, "implicit_watch_resumed_from_sources_total", "implicit_watch_resume_failures_total")
	bodies := int64(0)
	for _, c := range clients {
		bodies += c.body.Load()
	}
	wire := counter.read.Load()
	peak := b.peakRSS()
	profiled := b.switchProfile(ctx, scope, "resume")
	cpuI, cpuK := b.implicitSrv.cpu(), b.kubeSrv.cpu()
	start = time.Now()
	resumeCtx, cancelResume := context.WithTimeout(ctx, 10*time.Minute)
	errs := make([]error, len(clients))
	var rwg sync.WaitGroup
	for i, c := range clients {
		rwg.Go(func() {
			errs[i] = c.watch(resumeCtx, true, time.Now().Add(retryFor))
			c.took = time.Since(start)
			if errs[i] == nil && len(c.pending) > 0 {
				errs[i] = fmt.Errorf("%s: the watch ended with %d writes not received", c.path, len(c.pending))
			}
		})
	}
	rwg.Wait()
	cancelResume()
	r := &sr.Resume
	r.Last = time.Since(start)
	r.CPUImplicit, r.CPUKube = b.implicitSrv.cpu()-cpuI, b.kubeSrv.cpu()-cpuK
	r.PeakRSSImplicit, r.PeakRSSKube = peak()
	r.Wire = counter.read.Load() - wire
	for _, c := range clients {
		r.Times = append(r.Times, c.took)
		r.Body += c.body.Load()
		r.Events += c.events
		r.Bookmarks += c.bookmarks
		r.Retries += c.retries
	}
	r.Body -= bodies
	for _, err := range errs {
		if err != nil {
			r.Errors = append(r.Errors, err.Error())
		}
	}
	after, _ := b.implicitSrv.metrics(ctx, "implicit_watch_resumed_from_sources_total", "implicit_watch_resume_failures_total",
		"implicit_watch_history_events", "implicit_watch_history_bytes")
	sr.ResumedFromSrc = after["implicit_watch_resumed_from_sources_total"] - before["implicit_watch_resumed_from_sources_total"]
	sr.ResumeFailures = after["implicit_watch_resume_failures_total"] - before["implicit_watch_resume_failures_total"]
	sr.NewHistoryEvents, sr.NewHistoryBytes = after["implicit_watch_history_events"], after["implicit_watch_history_bytes"]
	profiled()
	sr.MemAfter = b.implicitSrv.memory(ctx)
	fmt.Printf("  resume: %s; %d events (%d bookmarks), %s on the wire, %s decoded; %d retried requests; %.0f resumed from the sources, %.0f failed\n",
		r.summary(), r.Events, r.Bookmarks, mib(float64(r.Wire)), mib(float64(r.Body)), r.Retries, sr.ResumedFromSrc, sr.ResumeFailures)
	fmt.Printf("    CPU implicit-apiserver %s, kube-apiserver %s; peak RSS implicit-apiserver %s, kube-apiserver %s; after: %s\n",
		r.CPUImplicit.Round(time.Millisecond), r.CPUKube.Round(time.Millisecond), mib(r.PeakRSSImplicit), mib(r.PeakRSSKube), sr.MemAfter)
	if len(r.Errors) > 0 {
		fmt.Printf("  RESUME FAILED for %d clients, e.g. %s\n", len(r.Errors), r.Errors[0])
		if len(r.Errors) > 10 {
			r.Errors = r.Errors[:10]
		}
	}
	b.prog.step("%s: resumed", sr.Scope)

	// Relist, and each client's state against it. The relist, too, is
	// measured on a new process, as after a restart without versions any
	// replica serves: its clients reconnect at once, as the resume's did.
	b.prog.show("%s: restarting again for the relist", sr.Scope)
	if _, _, err := b.newProcess(ctx, base); err != nil {
		return sr, fmt.Errorf("before the relist: %w", err)
	}
	b.prog.show("%s: relisting", sr.Scope)
	l := &sr.Relist
	wire = counter.read.Load()
	bodies = 0
	for _, c := range clients {
		bodies += c.body.Load()
	}
	peak = b.peakRSS()
	for _, c := range clients {
		c.retries = 0
	}
	profiled = b.switchProfile(ctx, scope, "relist")
	cpuI, cpuK = b.implicitSrv.cpu(), b.kubeSrv.cpu()
	start = time.Now()
	fresh := make([]map[string]string, len(clients))
	received := make([]time.Duration, len(clients))
	decoded := make([]time.Duration, len(clients))
	watched := make([]time.Duration, len(clients))
	var lwg sync.WaitGroup
	for i, c := range clients {
		lwg.Go(func() {
			// A failed request is sent again (counted), as for the
			// resume: the aggregator answers 503 while it marks a busy
			// implicit-apiserver unavailable.
			retry := func(f func() error) error {
				until := time.Now().Add(retryFor)
				for {
					err := f()
					if err == nil || ctx.Err() != nil || time.Now().After(until) {
						return err
					}
					c.retries++
					time.Sleep(100 * time.Millisecond)
				}
			}
			var listRV string
			err := retry(func() (err error) {
				fresh[i], listRV, received[i], decoded[i], err = c.list(ctx)
				received[i], decoded[i] = time.Since(start)-decoded[i]+received[i], time.Since(start)
				return err
			})
			if err == nil {
				// An informer watches again from its list's version:
				// until the watch's response headers.
				err = retry(func() error { return c.openWatch(ctx, listRV) })
				watched[i] = time.Since(start)
			}
			errs[i] = err
		})
	}
	lwg.Wait()
	l.Last = time.Since(start)
	l.CPUImplicit, l.CPUKube = b.implicitSrv.cpu()-cpuI, b.kubeSrv.cpu()-cpuK
	l.PeakRSSImplicit, l.PeakRSSKube = peak()
	l.Wire = counter.read.Load() - wire
	for i, c := range clients {
		l.Body += c.body.Load()
		l.Events += int64(len(fresh[i]))
		l.Retries += c.retries
		l.Times = append(l.Times, watched[i])
		l.Listed = append(l.Listed, decoded[i])
		l.Received = append(l.Received, received[i])
		if errs[i] != nil {
			l.Errors = append(l.Errors, errs[i].Error())
		}
	}
	l.Body -= bodies
	profiled()
	sr.MemAfterList = b.implicitSrv.memory(ctx)
	fmt.Printf("  relist (on a new process of its own), then a watch from the list's version: %s (the list decoded: %s; its last byte: %s); %d items, %s on the wire, %s decoded; %d retried requests\n", l.summary(), l.Listed.String(), l.Received.String(), l.Events, mib(float64(l.Wire)), mib(float64(l.Body)), l.Retries)
	fmt.Printf("    CPU implicit-apiserver %s, kube-apiserver %s; peak RSS implicit-apiserver %s, kube-apiserver %s; after: %s\n",
		l.CPUImplicit.Round(time.Millisecond), l.CPUKube.Round(time.Millisecond), mib(l.PeakRSSImplicit), mib(l.PeakRSSKube), sr.MemAfterList)
	if len(l.Errors) > 0 {
		return sr, fmt.Errorf("relist: %d failed, e.g. %s", len(l.Errors), l.Errors[0])
	}
	for i, c := range clients {
		if d := diffItems(c.items, fresh[i]); d != "" {
			sr.Mismatched++
			if len(sr.Mismatches) < 10 {
				sr.Mismatches = append(sr.Mismatches, c.path+": "+d)
			}
		}
	}
	if sr.Mismatched > 0 || len(r.Errors) > 0 {
		if len(r.Errors) > 0 && sr.Mismatched == 0 {
			sr.Mismatched = len(r.Errors)
		}
		fmt.Printf("  !!! CORRECTNESS FAILURE: %d of %d clients do not hold what a fresh list of their scope returns after the resume:\n", sr.Mismatched, len(clients))
		for _, m := range sr.Mismatches {
			fmt.Printf("  !!!   %s\n", m)
		}
	} else {
		fmt.Printf("  every client's state after the resume equals a fresh list of its scope (%d clients, names and source resourceVersions)\n", len(clients))
	}
	b.prog.step("%s: relisted", sr.Scope)
	return sr, nil
}

func (c *costs) summary() string {
	if len(c.Times) == 1 {
		return dur(c.Last)
	}
	return fmt.Sprintf("last client %s, per client %s", dur(c.Last), c.Times)
}

// diffItems says how held differs from want ("" if equal), briefly.
func diffItems(held, want map[string]string) string {
	var missing, extra, stale []string
	for k, v := range want {
		h, ok := held[k]
		switch {
		case !ok:
			missing = append(missing, k)
		case h != v:
			stale = append(stale, fmt.Sprintf("%s (holds source %s, list %s)", k, h, v))
		}
	}
	for k := range held {
		if _, ok := want[k]; !ok {
			extra = append(extra, k)
		}
	}
	if len(missing)+len(extra)+len(stale) == 0 {
		return ""
	}
	first := func(s []string) string {
		if len(s) == 0 {
			return ""
		}
		return " e.g. " + s[0]
	}
	return fmt.Sprintf("%d missing%s, %d deleted but held%s, %d stale%s", len(missing), first(missing), len(extra), first(extra), len(stale), first(stale))
}

// peakRSS samples implicit-apiserver's and kube-apiserver's RSS every 50 ms
// until the returned function is called, which returns the peaks.
func (b *bench) peakRSS() func() (implicit, kube float64) {
	var mu sync.Mutex
	var pi, pk float64
	sample := func() {
		var i, k float64
		if p := b.implicitSrv.process(); p != nil {
			i = procRSS(p.Pid())
		}
		if p := b.kubeSrv.process(); p != nil {
			k = procRSS(p.Pid())
		}
		mu.Lock()
		pi, pk = max(pi, i), max(pk, k)
		mu.Unlock()
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			sample()
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() (float64, float64) {
		close(stop)
		<-done
		sample()
		mu.Lock()
		defer mu.Unlock()
		return pi, pk
	}
}

// switchMarkdown writes the replica switch's tables.
func (r *results) switchMarkdown(p func(string, ...any)) {
	p("")
	p("### Replica switch: resume from the last version on a new process, against a relist")
	p("")
	p("| N × G | scope | clients | way | to the last client | per client, median | p99 | events / items | bytes on the wire | decoded | implicit-apiserver CPU | kube-apiserver CPU | peak RSS implicit-apiserver | peak RSS kube-apiserver | requests retried (503) |")
	p("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range r.Switch {
		for _, sc := range s.Scopes {
			for _, w := range []struct {
				name string
				c    costs
			}{{"resume", sc.Resume}, {fmt.Sprintf("relist on a new process, then watch (the list alone: median %s, slowest %s)", dur(sc.Relist.Listed.median()), dur(sc.Relist.Listed.percentile(1))), sc.Relist}} {
				p("| %d × %d | %s | %d | %s | %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %d |", s.N, s.G, sc.Scope, sc.Clients, w.name, dur(w.c.Last),
					dur(w.c.Times.median()), dur(w.c.Times.p99()), w.c.Events, mib(float64(w.c.Wire)), mib(float64(w.c.Body)),
					w.c.CPUImplicit.Round(time.Millisecond), w.c.CPUKube.Round(time.Millisecond), mib(w.c.PeakRSSImplicit), mib(w.c.PeakRSSKube), w.c.Retries)
			}
		}
	}
	p("")
	p("| N × G | scope | old process: watch history (events, estimated bytes) | its live heap, RSS | stop | new process ready, serving views (its CPU) | distinct versions resumed from | resumed from the sources | 410s | live heap: ready, after the resume, after the relist | correct |")
	p("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, s := range r.Switch {
		for _, sc := range s.Scopes {
			correct := "every client equals a fresh list"
			if sc.Mismatched > 0 {
				correct = fmt.Sprintf("**FAILED: %d of %d differ**", sc.Mismatched, sc.Clients)
			}
			p("| %d × %d | %s | %.0f, %s | %s, %s | %s | %s, %s (%s) | %d | %.0f | %.0f | %s, %s, %s | %s |", s.N, s.G, sc.Scope,
				sc.HistoryEvents, mib(sc.HistoryBytes), mib(sc.OldMem.HeapLive), mib(sc.OldMem.RSS), dur(sc.Stop), dur(sc.Start), dur(sc.Serving), sc.StartCPU.Round(time.Millisecond),
				sc.DistinctRVs, sc.ResumedFromSrc, sc.ResumeFailures, mib(sc.MemReady.HeapLive), mib(sc.MemAfter.HeapLive), mib(sc.MemAfterList.HeapLive), correct)
		}
	}
	p("")
	for _, s := range r.Switch {
		p("N=%d: setup %s, whole run %s; load average %s before, %s after.", s.N, s.SetupTime.Round(time.Second), s.Total.Round(time.Second), s.LoadBefore, s.LoadAfter)
	}
}

// switchProfile starts CPU profiles of implicit-apiserver and kube-apiserver
// for -switch-profile seconds; the returned function waits for them and
// saves implicit-apiserver's heap profile (after a GC). Nothing without
// -switch-profile.
func (b *bench) switchProfile(ctx context.Context, scope, what string) func() {
	if b.o.switchProfile <= 0 {
		return func() {}
	}
	tag := fmt.Sprintf("switch-N%d-%s-%s", b.n, scope, what)
	wi := b.implicitSrv.cpuProfile(ctx, b.o.outDir, tag, b.o.switchProfile)
	wk := b.kubeSrv.cpuProfile(ctx, b.o.outDir, tag, b.o.switchProfile)
	return func() {
		wi()
		wk()
		b.implicitSrv.profile(ctx, b.o.outDir, tag)
	}
}

// openWatch opens a watch of the scope from rv and closes it once its
// response headers are in.
func (c *switchClient) openWatch(ctx context.Context, rv string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := c.do(ctx, url.Values{"watch": {"true"}, "allowWatchBookmarks": {"true"}, "resourceVersion": {rv},
		"timeoutSeconds": {strconv.Itoa(switchWatchSeconds)}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("watch %s from %s: %s", c.path, rv, resp.Status)
	}
	return nil
}
