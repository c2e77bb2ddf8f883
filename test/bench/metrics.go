package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

// memSample is one server's memory: resident set from /proc, and the Go
// heap still in use right after a garbage collection (forced through
// /debug/pprof/heap?gc=1, so the figure is live objects, not garbage).
type memSample struct {
	RSS      float64 `json:"rssBytes"`
	HeapLive float64 `json:"heapLiveBytes"` // go_memstats_heap_alloc_bytes after GC
	HeapUse  float64 `json:"heapInuseBytes"`
	// Stacks are the goroutine stacks (go_memstats_stack_inuse_bytes), part
	// of the RSS but not of the heap.
	Stacks     float64 `json:"stackInuseBytes"`
	Goroutines float64 `json:"goroutines"`
}

func (m memSample) String() string {
	return fmt.Sprintf("RSS %s, live heap %s, stacks %s (%.0f goroutines)", mib(m.RSS), mib(m.HeapLive), mib(m.Stacks), m.Goroutines)
}

// memPair is implicit-apiserver's and kube-apiserver's memory at one moment.
type memPair struct {
	Implicit memSample `json:"implicit"`
	Kube     memSample `json:"kube"`
}

// server is a process the harness scrapes: its pid and its secure port.
type server struct {
	name    string
	process func() *controlplane.Process
	client  kubernetes.Interface
}

// newServer returns a scraper of the server at url, as admin (loopback;
// implicit-apiserver's serving certificate is self-signed).
func (b *bench) newServer(name, url string, process func() *controlplane.Process) (*server, error) {
	cfg := rest.CopyConfig(b.cfg)
	cfg.Host = url
	cfg.CAData, cfg.CAFile, cfg.Insecure = nil, "", true
	cfg.Timeout = 2 * time.Minute
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &server{name: name, process: process, client: c}, nil
}

func (s *server) get(ctx context.Context, path string, params ...string) ([]byte, error) {
	req := s.client.CoreV1().RESTClient().Get().AbsPath(path)
	for i := 0; i+1 < len(params); i += 2 {
		req = req.Param(params[i], params[i+1])
	}
	return req.DoRaw(ctx)
}

// metrics returns the unlabelled samples of /metrics whose names are given,
// and the sums over labels of the labelled ones.
func (s *server) metrics(ctx context.Context, names ...string) (map[string]float64, error) {
	body, err := s.get(ctx, "/metrics")
	if err != nil {
		return nil, fmt.Errorf("%s /metrics: %w", s.name, err)
	}
	out := map[string]float64{}
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		for _, n := range names {
			rest, ok := strings.CutPrefix(line, n)
			if !ok || (rest[0] != ' ' && rest[0] != '{') {
				continue
			}
			fields := strings.Fields(rest)
			if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
				out[n] += v
			}
		}
	}
	return out, nil
}

// memory forces a garbage collection and reads the server's memory.
func (s *server) memory(ctx context.Context) memSample {
	var m memSample
	if p := s.process(); p != nil {
		m.RSS = procRSS(p.Pid())
	}
	if _, err := s.get(ctx, "/debug/pprof/heap", "gc", "1"); err != nil {
		fmt.Printf("  (%s: forcing a GC: %v)\n", s.name, err)
	}
	v, err := s.metrics(ctx, "go_memstats_heap_alloc_bytes", "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_goroutines")
	if err != nil {
		fmt.Printf("  (%v)\n", err)
		return m
	}
	m.HeapLive, m.HeapUse = v["go_memstats_heap_alloc_bytes"], v["go_memstats_heap_inuse_bytes"]
	m.Stacks, m.Goroutines = v["go_memstats_stack_inuse_bytes"], v["go_goroutines"]
	return m
}

// profile saves the server's heap (after a GC) and goroutine profiles under dir.
func (s *server) profile(ctx context.Context, dir, tag string) {
	for _, p := range []struct{ path, file string }{
		{"/debug/pprof/heap", "heap"},
		{"/debug/pprof/goroutine", "goroutine"},
	} {
		body, err := s.get(ctx, p.path, "gc", "1")
		if err != nil {
			fmt.Printf("  (%s %s profile: %v)\n", s.name, p.file, err)
			continue
		}
		path := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.pb.gz", s.name, p.file, tag))
		if err := os.WriteFile(path, body, 0o644); err == nil {
			fmt.Printf("  %s profile of %s saved to %s\n", p.file, s.name, path)
		}
	}
}

// cpuProfile starts a CPU profile of seconds and saves it under dir when it
// ends; wait for it with the returned function.
func (s *server) cpuProfile(ctx context.Context, dir, tag string, seconds int) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		body, err := s.get(ctx, "/debug/pprof/profile", "seconds", strconv.Itoa(seconds))
		if err != nil {
			fmt.Printf("  (%s CPU profile: %v)\n", s.name, err)
			return
		}
		path := filepath.Join(dir, fmt.Sprintf("%s-cpu-%s.pb.gz", s.name, tag))
		if err := os.WriteFile(path, body, 0o644); err == nil {
			fmt.Printf("  CPU profile of %s (%d s) saved to %s\n", s.name, seconds, path)
		}
	}()
	return func() { <-done }
}

// cpu is the process's user+system CPU time so far, from /proc/<pid>/stat.
func (s *server) cpu() time.Duration {
	p := s.process()
	if p == nil {
		return 0
	}
	return procCPU(p.Pid())
}

func (b *bench) memory(ctx context.Context, when string) memPair {
	m := memPair{Implicit: b.implicitSrv.memory(ctx), Kube: b.kubeSrv.memory(ctx)}
	fmt.Printf("  memory %s: implicit-apiserver %s; kube-apiserver %s\n", when, m.Implicit, m.Kube)
	return m
}

func procRSS(pid int) float64 {
	body, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			kb, _ := strconv.ParseFloat(f[0], 64)
			return kb * 1024
		}
	}
	return 0
}

// clockTicks is USER_HZ, 100 on Linux amd64.
const clockTicks = 100

func procCPU(pid int) time.Duration {
	body, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command (field 2) is in parentheses and may hold spaces.
	s := string(body)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// ioCounts are a process's read and write system calls and bytes
// (/proc/<pid>/io): how a fleet's events reach the wire.
type ioCounts struct{ syscr, syscw, rchar, wchar int64 }

func (s *server) io() ioCounts {
	p := s.process()
	if p == nil {
		return ioCounts{}
	}
	body, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", p.Pid()))
	if err != nil {
		return ioCounts{}
	}
	var c ioCounts
	for line := range strings.Lines(string(body)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscr":
			c.syscr = n
		case "syscw":
			c.syscw = n
		case "rchar":
			c.rchar = n
		case "wchar":
			c.wchar = n
		}
	}
	return c
}

func (c ioCounts) per(from ioCounts, runs int64) string {
	return fmt.Sprintf("reads %d (%d B), writes %d (%d B)", (c.syscr-from.syscr)/runs, (c.rchar-from.rchar)/runs, (c.syscw-from.syscw)/runs, (c.wchar-from.wchar)/runs)
}
