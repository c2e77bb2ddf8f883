package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// kubectlRunner runs real kubectl explain as admin against the bench's
// kube-apiserver.
type kubectlRunner struct {
	path, kubeconfig string
	work             string // fresh cache dirs are made here
	warm             string // the warm cache dir
}

// explain runs `kubectl explain resource` with cacheDir ("": a new one,
// removed after) and checks its output names want (the kind).
func (k *kubectlRunner) explain(ctx context.Context, cacheDir, resource, want string) (time.Duration, error) {
	if cacheDir == "" {
		dir, err := os.MkdirTemp(k.work, "kubectl-fresh-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(dir)
		cacheDir = dir
	}
	began := time.Now()
	out, err := k.run(ctx, cacheDir, "explain", resource)
	took := time.Since(began)
	if err != nil {
		return took, err
	}
	if !strings.Contains(out, want) || !strings.Contains(out, "implicit.dev") {
		return took, fmt.Errorf("the output names no %s of implicit.dev", want)
	}
	return took, nil
}

// run runs kubectl args with cacheDir, 20 s at most; a failure's error is
// its stderr.
func (k *kubectlRunner) run(ctx context.Context, cacheDir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, k.path, append([]string{"--kubeconfig=" + k.kubeconfig, "--cache-dir=" + cacheDir}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if msg == "" {
			msg = err.Error()
		}
		return "", fmt.Errorf("%s", msg)
	}
	return out.String(), nil
}

// until tries kubectl explain of target (e.g. probe0s.implicit.dev), 500 ms after each
// failed try, until one shows want or ctx ends; times from changed.
func (k *kubectlRunner) until(ctx context.Context, changed time.Time, cacheDir, target, want string) explainTries {
	t := explainTries{Failures: map[string]int{}}
	for ctx.Err() == nil {
		took, err := k.explain(ctx, cacheDir, target, want)
		t.Tries++
		t.Slowest = max(t.Slowest, took)
		if err == nil {
			t.Shown = time.Since(changed)
			return t
		}
		if ctx.Err() != nil {
			break
		}
		msg, _, _ := strings.Cut(err.Error(), "\n")
		t.Failures[shortFailure(msg)]++
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	return t
}

// shortFailure keeps what tells kubectl's failures apart: the resource's
// name changes from run to run.
func shortFailure(msg string) string {
	switch {
	case strings.Contains(msg, "doesn't have a resource type"):
		return "no resource type (discovery)"
	case strings.Contains(msg, `field "dev" does not exist`), strings.Contains(msg, `field "implicit" does not exist`):
		return "resolved to the source's group (kubectl's discovery has no view of it)"
	case strings.Contains(msg, "the output names no"):
		return "the previous schema"
	case strings.Contains(msg, "redirect this request"):
		return "redirect refused (OpenAPI hash)"
	case strings.Contains(msg, "couldn't find resource"), strings.Contains(msg, "not found"):
		return "not in the OpenAPI document"
	}
	if len(msg) > 120 {
		msg = msg[:120] + "..."
	}
	return msg
}

// writeExplain prints the runs and a summary per binary, change and
// kubectl, and saves explain.json and explain.md under -out.
func writeExplain(o options, runs []explainRun) error {
	var sb strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&sb, f+"\n", a...) }
	p("\n| binary | run | kind added: view served | aggregator's discovery lists it | aggregator's OpenAPI hash changes | `kubectl explain`, new cache dir each try (tries) | warm cache dir (tries) | schema changed: aggregator's OpenAPI hash changes | `kubectl explain`, new cache dir (tries) | warm cache dir (tries) | load before |")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range runs {
		a, c := r.Added, r.Changed
		p("| %s%s | %d (%s) | %s | %s | %s | %s (%d) | %s (%d) | %s | %s (%d) | %s (%d) | %s |", r.Binary, map[bool]string{true: ", touched"}[r.Touched], r.Run, r.Resource,
			shown(a.Served), shown(a.Discovery), shown(a.OpenAPI), shown(a.Fresh.Shown), a.Fresh.Tries, shown(a.Warm.Shown), a.Warm.Tries,
			shown(c.OpenAPI), shown(c.Fresh.Shown), c.Fresh.Tries, shown(c.Warm.Shown), c.Warm.Tries, r.Load)
	}
	p("\n| binary | change | kubectl | explain shown after the change: median | max | runs (not shown within -explain-timeout %s) | failed tries, by cause |", o.explainTimeout)
	p("|---|---|---|---:|---:|---:|---|")
	for _, label := range []string{"before", "this"} {
		for _, change := range []string{"kind added", "schema changed"} {
			for _, cache := range []string{"new cache dir each try", "warm cache dir"} {
				var s samples
				missed := 0
				causes := map[string]int{}
				for _, r := range runs {
					if r.Binary != label {
						continue
					}
					ph := r.Added
					if change == "schema changed" {
						ph = r.Changed
					}
					t := ph.Fresh
					if cache == "warm cache dir" {
						t = ph.Warm
					}
					if t.Shown == 0 {
						missed++
					} else {
						s = append(s, t.Shown)
					}
					for c, n := range t.Failures {
						causes[c] += n
					}
				}
				if len(s)+missed == 0 {
					continue
				}
				p("| %s | %s | %s | %s | %s | %d (%d) | %v |", label, change, cache, shown(s.median()), shown(s.percentile(1)), len(s)+missed, missed, causes)
			}
		}
	}
	fmt.Print(sb.String())
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return err
	}
	body, _ := json.MarshalIndent(runs, "", "  ")
	if err := os.WriteFile(filepath.Join(o.outDir, "explain.json"), body, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.outDir, "explain.md"), []byte(sb.String()), 0o644)
}

// shown prints a time since the change, in seconds; "not seen" for 0.
func shown(d time.Duration) string {
	if d == 0 {
		return "not seen"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}
