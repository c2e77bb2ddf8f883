package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The scale edges of issue 45 that are not lists (-edges), on one control
// plane of -namespaces tenants (default 100) and the first -globals:
//
//   - the open storm: -storm-opens watches of the views opened at once
//     through kube-apiserver (-watchers-per-client per HTTP/2 connection,
//     each informer-style from its namespace's list version), while the
//     APIService's Available condition, kube-apiserver's /apis and the
//     group's /apis/implicit.dev/v1alpha1 are polled every 200 ms on
//     connections of their own: the opens attempted and answered 200, the
//     Available transitions, the discovery failures;
//   - the shutdown: with those watches open, implicit-apiserver gets
//     SIGTERM (its flags: -implicit-args, the chart's
//     --shutdown-delay-duration=5s unless given there): the time to its
//     exit, and how each watch ended (the stream's clean end, or an error:
//     a reset, a cut).

// stormResult is one run of -edges.
type stormResult struct {
	N, G           int
	Opens          int           `json:"opens"`
	Opened         int           `json:"opened"`
	OpenFailures   []string      `json:"openFailures,omitempty"`
	OpenTime       time.Duration `json:"openTime"` // until the last watch's headers
	Retries429     int           `json:"retries429"`
	CPUImplicit    time.Duration `json:"cpuImplicit"` // over the storm
	CPUKube        time.Duration `json:"cpuKube"`
	Connections    int           `json:"implicitConnections"` // kube-apiserver's to implicit-apiserver after the storm
	Polls          int           `json:"polls"`
	Unavailable    int           `json:"unavailablePolls"`     // polls that saw Available other than True
	Transitions    int           `json:"availableTransitions"` // changes of Available seen by the polls
	DiscoveryFails int           `json:"discoveryFailures"`    // /apis without implicit.dev, or failed
	GroupFails     int           `json:"groupFailures"`        // /apis/implicit.dev/v1alpha1 not 200
	PollFailures   []string      `json:"pollFailures,omitempty"`
	ShutdownDelay  string        `json:"shutdownDelay"`
	Exit           time.Duration `json:"exit"` // SIGTERM to the process's exit
	Killed         bool          `json:"killed"`
	Clean          int           `json:"clean"`    // watches whose stream ended cleanly
	Cut            int           `json:"cut"`      // watches that ended with an error
	Early          int           `json:"early"`    // ended before SIGTERM
	LastEnd        time.Duration `json:"lastEnd"`  // SIGTERM to the last watch's end
	FirstEnd       time.Duration `json:"firstEnd"` // SIGTERM to the first watch's end
	CutCauses      []string      `json:"cutCauses,omitempty"`
	// Timeline is the shutdown's steps after SIGTERM (edgesshutdown.go):
	// the server's log, its sockets, the watches' ends, the exit.
	Timeline        []shutdownStep `json:"timeline,omitempty"`
	LoadBefore      string         `json:"loadBefore"`
	LoadAfter       string         `json:"loadAfter"`
	ImplicitVersion string         `json:"implicitBinary"`
}

// stormWatch is one watch of the storm.
type stormWatch struct {
	ended    time.Time
	clean    bool
	cause    string
	openedOK bool
}

func edges(ctx context.Context, o options) error {
	n := o.namespaces[0]
	work, err := os.MkdirTemp("", "implicit-edges-")
	if err != nil {
		return err
	}
	prog := newProgress(os.Stderr, 3)
	res := &stormResult{N: n, G: o.globals[0], Opens: o.stormOpens, LoadBefore: loadAverage(), ImplicitVersion: o.binary}
	res.ShutdownDelay = "0s"
	for _, a := range o.implicitArgs {
		if v, ok := strings.CutPrefix(a, "--shutdown-delay-duration="); ok {
			res.ShutdownDelay = v
		}
	}
	fmt.Printf("\n== edges: N=%d tenant namespaces, G=%d, %d watch opens at once as %q, %d per connection; load average %s; binary %s; work dir %s\n",
		n, o.globals[0], o.stormOpens, o.watchUser, o.watchersPerConn, res.LoadBefore, o.binary, work)
	b, err := startBench(ctx, o, n, prog, work)
	if err != nil {
		fmt.Printf("logs kept in %s\n", filepath.Join(work, "logs"))
		return err
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
	b.o.globals = o.globals[:1]
	if err := b.setup(ctx); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	prog.step("setup done")
	if err := b.storm(ctx, res); err != nil {
		return err
	}
	prog.step("storm done")
	if err := b.shutdown(ctx, res); err != nil {
		return err
	}
	prog.step("shutdown done")
	res.LoadAfter = loadAverage()
	fmt.Print(res.markdown())
	body, _ := json.MarshalIndent(res, "", "  ")
	if err := os.MkdirAll(o.outDir, 0o755); err == nil {
		_ = os.WriteFile(filepath.Join(o.outDir, "edges.json"), body, 0o644)
	}
	ok = true
	return nil
}

// watches are the storm's watches, open until the shutdown.
var stormWatches struct {
	mu  sync.Mutex
	all []*stormWatch
	wg  sync.WaitGroup
}

// storm opens o.stormOpens watches at once and polls availability and
// discovery meanwhile.
func (b *bench) storm(ctx context.Context, res *stormResult) error {
	// Each tenant's list version, as an informer watches from its list's.
	rvs := make([]string, len(b.tenants))
	if err := parallel(ctx, len(b.tenants), workers, func(ctx context.Context, i int) error {
		l, err := b.dyn.Resource(viewRoleBindings).Namespace(b.tenants[i]).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		rvs[i] = l.GetResourceVersion()
		return nil
	}); err != nil {
		return err
	}
	// As -watch-user (the fleets' user: not system:masters, so kube-apiserver's
	// priority and fairness queues its requests), unless it is "".
	var as *rest.Config
	if b.o.watchUser != "" {
		if err := b.watcher(ctx); err != nil {
			return err
		}
		as = b.watcherCfg
	}
	if b.o.stormDirect {
		// Straight to implicit-apiserver's port as admin: the server's part
		// without kube-apiserver's proxy.
		as = rest.CopyConfig(b.cfg)
		as.Host = b.implicit.URL()
		as.CAData, as.CAFile, as.Insecure = nil, "", true
	}
	clients, err := b.clientsAs(as, (b.o.stormOpens+b.o.watchersPerConn-1)/b.o.watchersPerConn)
	if err != nil {
		return err
	}
	// Each connection is up before the storm, as a client's connection to a
	// load balancer in front of kube-apiserver is: the storm is the opens,
	// -watchers-per-client at once on each, not 10,000 TLS handshakes.
	if err := parallel(ctx, len(clients), workers, func(ctx context.Context, i int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, clients[i].host+"/version", nil)
		if err != nil {
			return err
		}
		resp, err := clients[i].http.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}); err != nil {
		return err
	}
	pollCtx, stopPolls := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() { defer close(polled); b.pollAvailability(pollCtx, res) }()
	time.Sleep(time.Second) // on purpose: a few polls before the storm

	var opened, answered, retries atomic.Int64
	var failMu sync.Mutex
	// The servers' CPU over the storm, and (-open-profile) their CPU
	// profiles from its start.
	cpuImplicit, cpuKube := b.implicitSrv.cpu(), b.kubeSrv.cpu()
	var profiled []func()
	if b.o.openProfile > 0 {
		for _, s := range []*server{b.implicitSrv, b.kubeSrv} {
			profiled = append(profiled, s.cpuProfile(ctx, b.o.outDir, "storm", b.o.openProfile))
		}
	}
	start := time.Now()
	all := make([]*stormWatch, b.o.stormOpens)
	done := make(chan struct{}, b.o.stormOpens)
	// launch opens watch i as w; the returned channel says whether it
	// opened, and the stream is read on until it ends.
	launch := func(i int, w *stormWatch) <-chan error {
		c := clients[i/b.o.watchersPerConn]
		ns := i % len(b.tenants)
		result := make(chan error, 1)
		stormWatches.wg.Add(1)
		go func() {
			defer stormWatches.wg.Done()
			q := url.Values{"watch": {"true"}, "allowWatchBookmarks": {"true"}, "resourceVersion": {rvs[ns]}, "timeoutSeconds": {"3600"}}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.host+"/apis/implicit.dev/v1alpha1/namespaces/"+b.tenants[ns]+"/rolebindings?"+q.Encode(), nil)
			if err != nil {
				panic(err)
			}
			req.Header.Set("Accept", "application/json")
			resp, err := c.http.Do(req)
			// A 429 (kube-apiserver's priority and fairness queue full, or
			// the server shutting down) is sent again after its
			// Retry-After, as client-go does.
			for tries := 0; err == nil && resp.StatusCode == http.StatusTooManyRequests && tries < 100; tries++ {
				retries.Add(1)
				resp.Body.Close()
				after, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
				time.Sleep(time.Duration(max(after, 1)) * time.Second)
				resp, err = c.http.Do(req)
			}
			answered.Add(1)
			if err == nil && resp.StatusCode != http.StatusOK {
				msg, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
				resp.Body.Close()
				err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
			}
			if err != nil {
				w.ended, w.cause = time.Now(), "not opened"
				result <- err
				return
			}
			w.openedOK = true
			result <- nil
			defer resp.Body.Close()
			dec := json.NewDecoder(resp.Body)
			for {
				var ev json.RawMessage
				if err := dec.Decode(&ev); err != nil {
					w.ended = time.Now()
					if errors.Is(err, io.EOF) {
						w.clean = true
					} else {
						w.cause = cause(err)
					}
					return
				}
			}
		}()
		return result
	}
	for i := range all {
		all[i] = &stormWatch{}
		r := launch(i, all[i])
		go func() {
			if err := <-r; err != nil {
				failMu.Lock()
				res.OpenFailures = append(res.OpenFailures, err.Error())
				failMu.Unlock()
			} else {
				opened.Add(1)
			}
			done <- struct{}{}
		}()
	}
	for range all {
		<-done
	}
	res.OpenTime = time.Since(start)
	res.CPUImplicit, res.CPUKube = b.implicitSrv.cpu()-cpuImplicit, b.kubeSrv.cpu()-cpuKube
	for _, wait := range profiled {
		wait()
	}
	res.Opened = int(opened.Load())
	res.Retries429 = int(retries.Load())
	time.Sleep(2 * time.Second) // on purpose: the polls after the storm
	stopPolls()
	<-polled
	res.Connections = b.implicitConnections()
	fmt.Printf("storm: %d of %d watches opened in %s (%d 429s sent again, %d connections to implicit-apiserver); APIService polls %d, not Available %d, transitions %d; /apis without implicit.dev %d; /apis/implicit.dev/v1alpha1 failed %d\n",
		res.Opened, res.Opens, res.OpenTime.Round(time.Millisecond), res.Retries429, res.Connections, res.Polls, res.Unavailable, res.Transitions, res.DiscoveryFails, res.GroupFails)

	// The watches the storm did not open are opened again, 16 at a time
	// and each until it opens, for the shutdown's count.
	begin := time.Now()
	var failed []int
	for i, w := range all {
		if !w.openedOK {
			failed = append(failed, i)
		}
	}
	if err := parallel(ctx, len(failed), workers, func(ctx context.Context, k int) error {
		i := failed[k]
		for {
			all[i] = &stormWatch{}
			err := <-launch(i, all[i])
			if err == nil {
				return nil
			}
			if time.Since(begin) > 5*time.Minute {
				return fmt.Errorf("watch %d did not open again in 5 min: %w", i, err)
			}
			time.Sleep(time.Second)
		}
	}); err != nil {
		return err
	}
	if len(failed) > 0 {
		fmt.Printf("the %d watches the storm did not open opened one by one in %s\n", len(failed), time.Since(begin).Round(time.Millisecond))
	}
	stormWatches.all = all
	return nil
}

// cause is err's message without stream IDs and addresses.
func cause(err error) string {
	s := err.Error()
	if i := strings.Index(s, "stream error"); i >= 0 {
		s = s[i:]
	}
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}

// pollAvailability polls the APIService's Available condition and
// discovery every 200 ms until ctx ends.
func (b *bench) pollAvailability(ctx context.Context, res *stormResult) {
	clients, err := b.clients(1)
	if err != nil {
		res.PollFailures = append(res.PollFailures, err.Error())
		return
	}
	c := clients[0]
	get := func(path string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.host+path, nil)
		req.Header.Set("Accept", "application/json")
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s %s", path, resp.Status)
		}
		return body, err
	}
	last := ""
	note := func(s string) {
		if len(res.PollFailures) < 20 {
			res.PollFailures = append(res.PollFailures, time.Now().Format("15:04:05.000")+" "+s)
		}
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		res.Polls++
		status := "?"
		if body, err := get("/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.implicit.dev"); err == nil {
			var svc struct {
				Status struct {
					Conditions []struct{ Type, Status, Reason, Message string } `json:"conditions"`
				} `json:"status"`
			}
			if json.Unmarshal(body, &svc) == nil {
				for _, cond := range svc.Status.Conditions {
					if cond.Type == "Available" {
						status = cond.Status
						if status != "True" {
							note("Available=" + status + " " + cond.Reason + ": " + cond.Message)
						}
					}
				}
			}
		} else if ctx.Err() == nil {
			note("APIService: " + err.Error())
		}
		if status != "True" && ctx.Err() == nil {
			res.Unavailable++
		}
		if last != "" && status != last {
			res.Transitions++
		}
		last = status
		if body, err := get("/apis"); err != nil || !strings.Contains(string(body), `"implicit.dev"`) {
			if ctx.Err() == nil {
				res.DiscoveryFails++
				note(fmt.Sprintf("/apis: implicit.dev missing (%v)", err))
			}
		}
		if _, err := get("/apis/implicit.dev/v1alpha1"); err != nil && ctx.Err() == nil {
			res.GroupFails++
			note(err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// shutdown sends implicit-apiserver SIGTERM with the storm's watches open
// and times its exit and the watches' ends.
func (b *bench) shutdown(ctx context.Context, res *stormResult) error {
	all := stormWatches.all
	for _, w := range all {
		if w.openedOK && !w.ended.IsZero() {
			res.Early++
		}
	}
	p := b.implicit.Process()
	rss := processRSS(p.Pid())
	start := time.Now()
	sockets := startSocketSampler(b.implicit.Port(), start)
	stopped := make(chan error, 1)
	go func() { stopped <- b.implicit.Stop() }()
	select {
	case <-p.Exited():
	case <-ctx.Done():
		sockets.finish()
		return ctx.Err()
	}
	res.Exit = time.Since(start)
	sockets.finish()
	if err := <-stopped; err != nil {
		res.Killed = true
		fmt.Printf("shutdown: %v\n", err)
	}
	waited := make(chan struct{})
	go func() { stormWatches.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(time.Minute):
		return fmt.Errorf("watches still open a minute after implicit-apiserver exited")
	}
	causes := map[string]int{}
	for _, w := range all {
		if !w.openedOK || w.ended.Before(start) {
			continue
		}
		d := w.ended.Sub(start)
		if res.FirstEnd == 0 || d < res.FirstEnd {
			res.FirstEnd = d
		}
		res.LastEnd = max(res.LastEnd, d)
		if w.clean {
			res.Clean++
		} else {
			res.Cut++
			causes[w.cause]++
		}
	}
	for c, k := range causes {
		res.CutCauses = append(res.CutCauses, fmt.Sprintf("%d× %s", k, c))
	}
	sort.Strings(res.CutCauses)
	res.Timeline = append(gracefulSteps(b.implicit.LogPath(), start),
		shutdownStep{0, fmt.Sprintf("(bench) SIGTERM; %d server-side sockets open, RSS %s", sockets.atStart, rss)},
		shutdownStep{res.FirstEnd, "(bench) the first watch ended at its client"},
		shutdownStep{res.LastEnd, "(bench) the last watch ended at its client"},
		shutdownStep{sockets.lastEstablished, "(bench) last sample with a server-side socket ESTABLISHED"},
		shutdownStep{sockets.allClosed, "(bench) first sample with every server-side socket closed by the server (none ESTABLISHED or CLOSE_WAIT; 50 ms samples)"},
		shutdownStep{res.Exit, "(bench) the process exited"})
	sort.SliceStable(res.Timeline, func(i, j int) bool { return res.Timeline[i].After < res.Timeline[j].After })
	fmt.Printf("shutdown: exit %s after SIGTERM (delay %s, killed %v); watches ended clean %d, cut %d, before SIGTERM %d; first end %s, last %s\n",
		res.Exit.Round(time.Millisecond), res.ShutdownDelay, res.Killed, res.Clean, res.Cut, res.Early, res.FirstEnd.Round(time.Millisecond), res.LastEnd.Round(time.Millisecond))
	return nil
}

func (r *stormResult) markdown() string {
	var sb strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&sb, f+"\n", a...) }
	p("\n| edges (N=%d, G=%d) | figure |", r.N, r.G)
	p("|---|---|")
	p("| watch opens at once: answered 200 (429s sent again) | %d of %d in %s (%d) |", r.Opened, r.Opens, dur(r.OpenTime), r.Retries429)
	p("| implicit-apiserver's open connections after the storm | %d |", r.Connections)
	p("| CPU over the storm: implicit-apiserver, kube-apiserver | %s, %s |", dur(r.CPUImplicit), dur(r.CPUKube))
	p("| APIService polls (200 ms): not Available, transitions | %d of %d, %d |", r.Unavailable, r.Polls, r.Transitions)
	p("| /apis without implicit.dev; /apis/implicit.dev/v1alpha1 failed | %d; %d |", r.DiscoveryFails, r.GroupFails)
	p("| SIGTERM to exit (--shutdown-delay-duration=%s) | %s%s |", r.ShutdownDelay, dur(r.Exit), map[bool]string{true: " (killed)"}[r.Killed])
	p("| watches ended: clean, cut (first, last end after SIGTERM) | %d, %d (%s, %s) |", r.Clean, r.Cut, dur(r.FirstEnd), dur(r.LastEnd))
	for _, c := range r.CutCauses {
		p("| cut | %s |", c)
	}
	sb.WriteString(timelineMarkdown(r.Timeline))
	for i, f := range r.OpenFailures {
		if i == 5 {
			p("| open failures | ... %d in all |", len(r.OpenFailures))
			break
		}
		p("| open failure | %s |", strconv.Quote(f))
	}
	for _, f := range r.PollFailures {
		p("| poll | %s |", strconv.Quote(f))
	}
	p("load average before %s, after %s", r.LoadBefore, r.LoadAfter)
	return sb.String()
}

// implicitConnections counts the established TCP connections to
// implicit-apiserver's port (from /proc/net/tcp: kube-apiserver's proxy and
// availability checks).
func (b *bench) implicitConnections() int {
	port := fmt.Sprintf(":%04X ", b.implicit.Port())
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		body, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(body), "\n") {
			fields := strings.Fields(line)
			// local address, remote address, state (01: established)
			if len(fields) > 3 && strings.HasSuffix(fields[1]+" ", port) && fields[3] == "01" {
				n++
			}
		}
	}
	return n
}
