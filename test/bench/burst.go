package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The burst mode (-burst, issue 45): each fleet alone opened as a
// reconnect storm opens it. Every watcher at once, each informer-style (a
// list of its path, then a watch from that list's resourceVersion), and
// -burst-per-client watchers on each client connection, the connections
// up before the burst (a restarting client's connection to a load
// balancer is one TLS handshake, not one per watch). A 429 is sent again
// after its Retry-After, as client-go does. The fan-out is then measured
// as the gentle method measures it (aloneFleet).

// burstOpen is what one burst opening cost, beside its time.
type burstOpen struct {
	Open        time.Duration `json:"open"`        // from the burst's start to the last watch's response headers
	First       time.Duration `json:"first"`       // to the first watch's response headers
	Retries429  int64         `json:"retries429"`  // lists and watches sent again after a 429
	RetryAfter  int64         `json:"retryAfter"`  // the longest Retry-After of those 429s, seconds
	Connections int           `json:"connections"` // kube-apiserver's connections to the server behind it, after (0: native)
	CPUKube     time.Duration `json:"cpuKube"`     // over the opening
	CPUBackend  time.Duration `json:"cpuBackend"`
}

// startBurst opens the watchers of spec at once, -burst-per-client on each
// connection, each listing its own path first (spec.listEach is implied).
func (b *bench) startBurst(ctx context.Context, spec fleetSpec, namespaces []string, backend *server, backendPort int) (*fleet, burstOpen, error) {
	var bo burstOpen
	per := b.o.burstPerConn
	nClients := (len(spec.paths) + per - 1) / per
	cs, err := b.clientsAs(spec.cfg, nClients)
	if err != nil {
		return nil, bo, err
	}
	var retries atomic.Int64
	for _, c := range cs {
		c.retries = &retries
	}
	longestRetryAfter.Store(0)
	// The connections are up before the burst.
	if err := parallel(ctx, len(cs), workers, func(ctx context.Context, i int) error {
		body, err := cs[i].get(ctx, "/version", nil)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, body)
		return body.Close()
	}); err != nil {
		return nil, bo, err
	}
	q := url.Values{}
	if spec.fieldSelector != "" {
		q.Set("fieldSelector", spec.fieldSelector)
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &fleet{spec: spec, cancel: cancel, tenants: map[string]bool{}}
	for _, ns := range namespaces {
		f.tenants[ns] = true
	}
	cpuKube := b.kubeSrv.cpu()
	var cpuBackend time.Duration
	if backend != nil {
		cpuBackend = backend.cpu()
	}
	var (
		wg          sync.WaitGroup
		errMu       sync.Mutex
		firstErr    error
		first, last atomic.Int64 // unix nanos of the first and last watch's headers
		release     = make(chan struct{})
	)
	for i, path := range spec.paths {
		c := cs[i/per]
		wg.Go(func() {
			<-release
			t0 := time.Now()
			rv, err := c.listVersion(ctx, path, q)
			if err != nil {
				err = fmt.Errorf("list %s: %w", path, err)
			}
			t1 := time.Now()
			if err == nil {
				err = f.watch(ctx, c, path, false, rv)
			}
			if err != nil {
				errMu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				errMu.Unlock()
				return
			}
			now := time.Now()
			first.CompareAndSwap(0, now.UnixNano())
			for l := last.Load(); l < now.UnixNano() && !last.CompareAndSwap(l, now.UnixNano()); l = last.Load() {
			}
			f.openMu.Lock()
			f.lists, f.watches = append(f.lists, t1.Sub(t0)), append(f.watches, now.Sub(t1))
			f.openMu.Unlock()
		})
	}
	start := time.Now()
	close(release)
	wg.Wait()
	if firstErr != nil {
		f.stop()
		return nil, bo, firstErr
	}
	bo.Open, bo.First = since(start, last.Load()), since(start, first.Load())
	bo.Retries429, bo.RetryAfter = retries.Load(), longestRetryAfter.Load()
	bo.CPUKube = b.kubeSrv.cpu() - cpuKube
	if backend != nil {
		bo.CPUBackend = backend.cpu() - cpuBackend
		bo.Connections = connectionsTo(backendPort)
	}
	f.open = len(spec.paths)
	fmt.Printf("  burst: %d watchers on %s over %d clients (%d each) opened in %s (first %s), %d 429s sent again (longest Retry-After %d s), %d connections to the server behind kube-apiserver; CPU over the opening: kube-apiserver %s, server %s\n",
		len(spec.paths), spec.what, nClients, per, dur(bo.Open), dur(bo.First), bo.Retries429, bo.RetryAfter, bo.Connections, dur(bo.CPUKube), dur(bo.CPUBackend))
	return f, bo, nil
}

// longestRetryAfter is the longest Retry-After of the 429s retryAfter429
// saw since the last burst began (kube-apiserver's priority and fairness
// doubles it, up to 32 s, while requests keep being rejected).
var longestRetryAfter atomic.Int64

// retryAfter429 sends req again after a 429's Retry-After (at least 1 s),
// at most 10 times, as client-go does; retries counts each.
func retryAfter429(ctx context.Context, hc *http.Client, req *http.Request, resp *http.Response, retries *atomic.Int64) (*http.Response, error) {
	var err error
	for tries := 0; resp.StatusCode == http.StatusTooManyRequests && tries < 10; tries++ {
		retries.Add(1)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		after := 1
		_, _ = fmt.Sscan(resp.Header.Get("Retry-After"), &after)
		for l := longestRetryAfter.Load(); int64(after) > l && !longestRetryAfter.CompareAndSwap(l, int64(after)); l = longestRetryAfter.Load() {
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(max(after, 1)) * time.Second):
		}
		if resp, err = hc.Do(req.Clone(ctx)); err != nil {
			return nil, err
		}
	}
	return resp, nil
}

// connectionsTo counts the established TCP connections to local port
// (kube-apiserver's to an aggregated server, on loopback).
func connectionsTo(port int) int {
	suffix := fmt.Sprintf(":%04X ", port)
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		body, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(body)) {
			fields := strings.Fields(line)
			// local address, remote address, state (01: established)
			if len(fields) > 3 && strings.HasSuffix(fields[1]+" ", suffix) && fields[3] == "01" {
				n++
			}
		}
	}
	return n
}

// The servers' metrics that say where an opening waits: priority and
// fairness (queued, rejected, the wait) and each verb's request time.
var openMetrics = []string{
	"apiserver_flowcontrol_rejected_requests_total",
	"apiserver_flowcontrol_request_wait_duration_seconds_sum",
	"apiserver_flowcontrol_request_wait_duration_seconds_count",
	"apiserver_flowcontrol_request_execution_seconds_sum",
	"apiserver_flowcontrol_request_execution_seconds_count",
	"apiserver_request_duration_seconds_sum",
	"apiserver_request_duration_seconds_count",
	"apiserver_request_total",
	"apiserver_delegated_authz_request_total",
	"apiserver_delegated_authz_request_duration_seconds_sum",
}

// series reads the samples of s's /metrics named in names, keyed by the
// whole series (name and labels).
func (s *server) series(ctx context.Context, names []string) (map[string]float64, error) {
	body, err := s.get(ctx, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("%s /metrics: %w", s.name, err)
	}
	out := map[string]float64{}
	for line := range strings.Lines(string(body)) {
		for _, n := range names {
			if rest, ok := strings.CutPrefix(line, n); ok && len(rest) > 0 && (rest[0] == '{' || rest[0] == ' ') {
				i := strings.LastIndexByte(line, ' ')
				var v float64
				if _, err := fmt.Sscan(line[i+1:], &v); err == nil {
					out[line[:i]] += v
				}
			}
		}
	}
	return out, nil
}

var labelRE = regexp.MustCompile(`(\w+)="([^"]*)"`)

// by sums after-before of the series of name over every label but keys,
// keyed by the keys' values joined with "/"; series not matching match
// (label=value pairs) are skipped.
func by(before, after map[string]float64, name string, keys []string, match map[string]string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if !strings.HasPrefix(k, name+"{") && k != name {
			continue
		}
		labels := map[string]string{}
		for _, m := range labelRE.FindAllStringSubmatch(k, -1) {
			labels[m[1]] = m[2]
		}
		skip := false
		for mk, mv := range match {
			skip = skip || labels[mk] != mv
		}
		if skip {
			continue
		}
		var parts []string
		for _, key := range keys {
			parts = append(parts, labels[key])
		}
		if d := v - before[k]; d != 0 {
			out[strings.Join(parts, "/")] += d
		}
	}
	return out
}

// openReport prints where s's requests waited between the two scrapes:
// priority and fairness per priority level (requests, mean wait, rejected)
// and each verb's requests and mean time, with the codes answered.
func openReport(s *server, before, after map[string]float64) {
	count := by(before, after, "apiserver_flowcontrol_request_wait_duration_seconds_count", []string{"priority_level"}, nil)
	sum := by(before, after, "apiserver_flowcontrol_request_wait_duration_seconds_sum", []string{"priority_level"}, nil)
	exCount := by(before, after, "apiserver_flowcontrol_request_execution_seconds_count", []string{"priority_level"}, nil)
	exSum := by(before, after, "apiserver_flowcontrol_request_execution_seconds_sum", []string{"priority_level"}, nil)
	rejected := by(before, after, "apiserver_flowcontrol_rejected_requests_total", []string{"priority_level", "reason"}, nil)
	var parts []string
	for _, pl := range sortedKeys(count) {
		parts = append(parts, fmt.Sprintf("%s %.0f (wait %s, execution %s)", pl, count[pl], meanSec(sum[pl], count[pl]), meanSec(exSum[pl], exCount[pl])))
	}
	for _, k := range sortedKeys(rejected) {
		parts = append(parts, fmt.Sprintf("rejected %s %.0f", k, rejected[k]))
	}
	fmt.Printf("    %s priority and fairness: %s\n", s.name, strings.Join(parts, "; "))
	vc := by(before, after, "apiserver_request_duration_seconds_count", []string{"verb"}, nil)
	vs := by(before, after, "apiserver_request_duration_seconds_sum", []string{"verb"}, nil)
	codes := by(before, after, "apiserver_request_total", []string{"verb", "code"}, nil)
	parts = parts[:0]
	for _, v := range sortedKeys(vc) {
		parts = append(parts, fmt.Sprintf("%s %.0f (mean %s)", v, vc[v], meanSec(vs[v], vc[v])))
	}
	for _, k := range sortedKeys(codes) {
		parts = append(parts, fmt.Sprintf("%s: %.0f", k, codes[k]))
	}
	fmt.Printf("    %s requests by verb (a watch counts when it ends): %s\n", s.name, strings.Join(parts, "; "))
	reviews := by(before, after, "apiserver_delegated_authz_request_total", nil, nil)[""]
	if reviews > 0 {
		took := by(before, after, "apiserver_delegated_authz_request_duration_seconds_sum", nil, nil)[""]
		fmt.Printf("    %s delegated SubjectAccessReviews: %.0f (mean %s)\n", s.name, reviews, meanSec(took, reviews))
	}
}

func meanSec(sum, count float64) string {
	if count == 0 {
		return "–"
	}
	return dur(time.Duration(sum / count * float64(time.Second)))
}

func sortedKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
