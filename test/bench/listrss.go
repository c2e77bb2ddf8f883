package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// Issue 45's lists that stream (-list-rss): at N tenants × G global
// RoleBindings, implicit-apiserver's peak RSS (VmHWM of /proc/<pid>/status,
// each case on a new process) while -A lists of rolebindings.implicit.dev
// go through kube-apiserver, for each binary measured (-list-before, then
// -implicit-binary, on the same control plane):
//
//   - one list, JSON, no limit (a client-go List);
//   - ten such lists at once (a relist storm; not for -list-before, whose
//     one list holds the whole view: ten could exhaust the machine);
//   - kubectl's requests: Table pages of 500 (kubectl get -A's Accept and
//     --chunk-size), for at most -list-pages-time;
//   - with -list-cases, one and ten watch-lists (sendInitialEvents=true)
//     to their initial-events-end bookmark.
//
// The clients decode items one at a time, counting them and checking their
// key order: the client's memory is not the figure.

// listCase is one case's figures.
type listCase struct {
	Binary, Case string
	Clients      int
	Items        []int64 // per client (rows for pages)
	Pages        int64
	Bytes        int64
	Took         time.Duration
	HWM, RSS     float64 // bytes
	Load         string
	Err          string
}

// listRequestTimeout is kube-apiserver's and implicit-apiserver's
// --request-timeout in -list-rss: a list is measured to its end.
const listRequestTimeout = "10m"

const kubectlTableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

func listRSS(ctx context.Context, o options) error {
	n, g := o.namespaces[0], o.globals[len(o.globals)-1]
	work, err := os.MkdirTemp("", "implicit-listrss-")
	if err != nil {
		return err
	}
	prog := newProgress(os.Stderr, 1)
	fmt.Printf("\n== list RSS: N=%d tenant namespaces (+%d orgs), G=%d global RoleBindings; load average %s; work dir %s\n", n, orgCount(n), g, loadAverage(), work)
	start := time.Now()
	b, err := startBench(ctx, o, n, prog, work)
	if err != nil {
		fmt.Printf("logs kept in %s\n", filepath.Join(work, "logs"))
		return err
	}
	defer func() {
		b.cp.Stop()
		fmt.Printf("logs kept in %s\n", filepath.Join(work, "logs"))
	}()
	o.globals = []int{g}
	b.o = o
	if err := b.setup(ctx); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	fmt.Printf("setup done in %s\n", time.Since(start).Round(time.Second))
	hc, err := rest.HTTPClientFor(b.cfg)
	if err != nil {
		return err
	}
	host := strings.TrimSuffix(b.cfg.Host, "/")
	path := "/apis/" + viewRoleBindings.Group + "/" + viewRoleBindings.Version + "/" + viewRoleBindings.Resource
	base := "/apis/" + viewRoleBindings.Group + "/" + viewRoleBindings.Version
	binaries := []string{o.binary}
	if o.listBefore != "" {
		binaries = []string{o.listBefore, o.binary}
	}
	var out []listCase
	for _, bin := range binaries {
		if err := b.implicit.SetBinary(bin); err != nil {
			return err
		}
		for _, c := range []struct {
			key, name string
			clients   int
			pages     bool
			watch     bool
		}{
			{"list", "one -A list, JSON, no limit", 1, false, false},
			{"lists10", "ten -A lists at once", 10, false, false},
			{"pages", "kubectl get -A: Table pages of 500", 1, true, false},
			{"watchlist", "one -A watch-list (sendInitialEvents) to its initial-events-end bookmark", 1, false, true},
			{"watchlists10", "ten -A watch-lists at once", 10, false, true},
		} {
			if !slices.Contains(o.listCases, c.key) {
				continue
			}
			if c.clients > 1 && bin == o.listBefore {
				// Before lists streamed, one -A list peaked at 4.4 GiB:
				// ten at once could take the shared machine's memory.
				continue
			}
			if _, _, err := b.newProcess(ctx, base); err != nil {
				return err
			}
			pid := b.implicitSrv.process().Pid()
			r := listCase{Binary: bin, Case: c.name, Clients: c.clients, Load: loadAverage(), Items: make([]int64, c.clients)}
			begin := time.Now()
			var wg sync.WaitGroup
			var mu sync.Mutex
			for i := range c.clients {
				wg.Go(func() {
					var items, pages, nb int64
					var err error
					switch {
					case c.pages:
						items, pages, nb, err = tablePages(ctx, hc, host+path, o.listPagesTime)
					case c.watch:
						items, nb, err = watchList(ctx, hc, host+path)
						pages = 1
					default:
						items, nb, err = streamList(ctx, hc, host+path)
						pages = 1
					}
					mu.Lock()
					defer mu.Unlock()
					r.Items[i], r.Bytes, r.Pages = items, r.Bytes+nb, r.Pages+pages
					if err != nil && r.Err == "" {
						r.Err = err.Error()
					}
				})
			}
			wg.Wait()
			r.Took = time.Since(begin)
			r.HWM, r.RSS = procStatus(pid, "VmHWM:"), procStatus(pid, "VmRSS:")
			fmt.Printf("%s | %s | clients %d | items %v | pages %d | %.1f MiB | %s | VmHWM %.0f MiB | VmRSS %.0f MiB | load %s | %s\n",
				filepath.Dir(bin), r.Case, r.Clients, r.Items, r.Pages, float64(r.Bytes)/(1<<20), r.Took.Round(100*time.Millisecond), r.HWM/(1<<20), r.RSS/(1<<20), r.Load, r.Err)
			out = append(out, r)
		}
	}
	fmt.Printf("\n| binary | case | items per client | pages | bytes received (all clients) | time | peak RSS (VmHWM) implicit-apiserver | load average |\n|---|---|---:|---:|---:|---:|---:|---|\n")
	for _, r := range out {
		fmt.Printf("| %s | %s | %d | %d | %.0f MiB | %.1f s | %.0f MiB | %s |\n", r.Binary, r.Case, r.Items[0], r.Pages, float64(r.Bytes)/(1<<20), r.Took.Seconds(), r.HWM/(1<<20), r.Load)
	}
	for _, r := range out {
		if r.Err != "" {
			return fmt.Errorf("%s, %s: %s", r.Binary, r.Case, r.Err)
		}
	}
	return nil
}

// procStatus reads a size field (kB) of /proc/<pid>/status, in bytes.
func procStatus(pid int, field string) float64 {
	body, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
			return kb * 1024
		}
	}
	return 0
}

// countingReader counts the bytes read.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// streamList GETs a list in JSON and decodes its items one at a time,
// checking that their keys ascend.
func streamList(ctx context.Context, hc *http.Client, u string) (items, nbytes int64, err error) {
	cr, closeBody, err := getJSON(ctx, hc, u)
	if err != nil {
		return 0, cr.n, err
	}
	defer closeBody()
	dec := json.NewDecoder(cr)
	// Walk to "items": [
	for {
		tok, err := dec.Token()
		if err != nil {
			return 0, cr.n, fmt.Errorf("no items: %w", err)
		}
		if tok == "items" {
			break
		}
	}
	if _, err := dec.Token(); err != nil { // [
		return 0, cr.n, err
	}
	last := ""
	for dec.More() {
		var it struct {
			Metadata struct{ Namespace, Name string } `json:"metadata"`
		}
		if err := dec.Decode(&it); err != nil {
			return items, cr.n, err
		}
		key := it.Metadata.Namespace + "/" + it.Metadata.Name
		if key <= last {
			return items, cr.n, fmt.Errorf("item %s after %s: not in key order", key, last)
		}
		last = key
		items++
	}
	_, _ = io.Copy(io.Discard, cr)
	return items, cr.n, nil
}

// tablePages GETs Table pages of 500 as kubectl get -A does, until the
// last or until d has passed.
func tablePages(ctx context.Context, hc *http.Client, u string, d time.Duration) (rows, pages, nbytes int64, err error) {
	deadline := time.Now().Add(d)
	cont := ""
	for {
		q := url.Values{"limit": {"500"}}
		if cont != "" {
			q.Set("continue", cont)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"?"+q.Encode(), nil)
		if err != nil {
			return rows, pages, nbytes, err
		}
		req.Header.Set("Accept", kubectlTableAccept)
		resp, err := hc.Do(req)
		if err != nil {
			return rows, pages, nbytes, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		nbytes += int64(len(body))
		if err != nil {
			return rows, pages, nbytes, err
		}
		if resp.StatusCode != http.StatusOK {
			return rows, pages, nbytes, fmt.Errorf("page %d: %s: %s", pages, resp.Status, body[:min(len(body), 512)])
		}
		var t struct {
			Metadata struct {
				Continue string `json:"continue"`
			} `json:"metadata"`
			Rows []json.RawMessage `json:"rows"`
		}
		if err := json.Unmarshal(body, &t); err != nil {
			return rows, pages, nbytes, err
		}
		rows += int64(len(t.Rows))
		pages++
		if cont = t.Metadata.Continue; cont == "" || time.Now().After(deadline) {
			return rows, pages, nbytes, nil
		}
	}
}

// watchList opens a watch-list (sendInitialEvents=true, bookmarks) in JSON
// and counts its ADDED events until the initial-events-end bookmark.
func watchList(ctx context.Context, hc *http.Client, u string) (items, nbytes int64, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := url.Values{"watch": {"1"}, "sendInitialEvents": {"true"}, "allowWatchBookmarks": {"true"}, "resourceVersionMatch": {"NotOlderThan"}}
	cr, closeBody, err := getJSON(ctx, hc, u+"?"+q.Encode())
	if err != nil {
		return 0, cr.n, err
	}
	defer closeBody()
	dec := json.NewDecoder(cr)
	for {
		var ev struct {
			Type   string `json:"type"`
			Object struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			} `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			return items, cr.n, fmt.Errorf("after %d events: %w", items, err)
		}
		switch ev.Type {
		case "ADDED":
			items++
		case "BOOKMARK":
			if ev.Object.Metadata.Annotations["k8s.io/initial-events-end"] == "true" {
				return items, cr.n, nil
			}
		default:
			return items, cr.n, fmt.Errorf("a %s event among the initial ones", ev.Type)
		}
	}
}

// getJSON GETs u as JSON; the caller reads the body through the returned
// counter and closes it. A status other than 200 is an error with the
// body's start (the counter then holds the bytes read).
func getJSON(ctx context.Context, hc *http.Client, u string) (*countingReader, func(), error) {
	cr := &countingReader{}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return cr, nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return cr, nil, err
	}
	cr.r = resp.Body
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(cr, 512))
		resp.Body.Close()
		return cr, nil, fmt.Errorf("GET %s: %s: %s", u, resp.Status, body)
	}
	return cr, func() { resp.Body.Close() }, nil
}
