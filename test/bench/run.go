package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

const globalNS = "implicit-global"

// bench holds one N's running cluster and the clients every phase shares.
type bench struct {
	o        options
	n        int
	prog     *progress
	cp       *controlplane.ControlPlane
	implicit *controlplane.AggregatedServer
	cfg      *rest.Config // admin, QPS 1000, Burst 2000
	kube     kubernetes.Interface
	dyn      dynamic.Interface

	implicitSrv, kubeSrv, etcdSrv *server
	// sample and sampleSrv are the aggregated-path reference (alone.go);
	// nil without -reference.
	sample     *controlplane.AggregatedServer
	sampleSrv  *server
	flunderDyn dynamic.Interface
	watcherCfg *rest.Config // -watch-user's, for the fleets alone

	orgs, tenants []string
	globals       int // global RoleBindings created so far
}

// sweep runs every N of the sweep on a control plane of its own, then
// writes the report and the plot.
func sweep(ctx context.Context, o options) error {
	start := time.Now()
	res := &results{
		Command: "go run ./test/bench " + strings.Join(os.Args[1:], " "),
		Machine: machine(),
		Started: start,
	}
	prog := newProgress(os.Stderr, totalSteps(o))
	for _, n := range o.namespaces {
		r, err := runN(ctx, o, n, prog)
		if r != nil {
			res.Ns = append(res.Ns, r)
		}
		if err != nil {
			res.Wall = time.Since(start)
			_ = res.write(o) // what was measured so far
			return fmt.Errorf("N=%d: %w", n, err)
		}
	}
	res.Wall = time.Since(start)
	prog.show("done")
	if err := res.write(o); err != nil {
		return err
	}
	if err := res.plot(o.plotPath); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if err := res.plotOpens(opensPath(o.plotPath)); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	fmt.Printf("\nplots written to %s and %s; results in %s\n", o.plotPath, opensPath(o.plotPath), o.outDir)
	fmt.Printf("sweep finished in %s\n", res.Wall.Round(time.Second))
	return nil
}

// totalSteps counts the progress bar's steps of the whole sweep.
func totalSteps(o options) int {
	perG := 2 + o.runs // globals and reads, watchers, rounds
	perN := 1 + len(o.globals)*perG + 1 + 1 + 2 + o.copyRuns + o.slowCopyRuns + 1
	if o.materializeRuns > 0 {
		perN += 1 + o.materializeRuns // the create, the edits
	}
	if o.fanoutOnly {
		perN = 1 + len(o.globals)*perG + 1
		if !o.concurrent {
			perN = 2
		}
	}
	perN += o.aloneRepeats * len(o.aloneFleets)
	return len(o.namespaces) * perN
}

func machine() string {
	mem := "?"
	if body, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(body)) {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				mem = strings.TrimSpace(v)
			}
		}
	}
	cpu := "?"
	if body, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(body)) {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s), MemTotal %s, %s/%s, %s", runtime.NumCPU(), cpu, mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// runN measures one N on a fresh control plane.
func runN(ctx context.Context, o options, n int, prog *progress) (*nResult, error) {
	work, err := os.MkdirTemp("", "implicit-bench-")
	if err != nil {
		return nil, err
	}
	res := &nResult{N: n, Orgs: orgCount(n)}
	fmt.Printf("\n== N=%d tenant namespaces (+%d orgs), G=%v global RoleBindings; work dir %s\n", n, orgCount(n), o.globals, work)
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
	implicit := b.implicit

	if err := b.setup(ctx); err != nil {
		return res, fmt.Errorf("setup: %w", err)
	}
	res.SetupTime = time.Since(start)
	prog.step("setup done N=%d", n)
	if o.reference {
		if err := b.startReference(ctx); err != nil {
			return res, err
		}
	}
	if o.concurrent {
		if err := b.measureImplicit(ctx, res); err != nil {
			return res, fmt.Errorf("%w\n%s", err, implicit.LogTail(20))
		}
	}
	if o.aloneRepeats > 0 {
		if err := b.measureAlone(ctx, res); err != nil {
			return res, fmt.Errorf("%w\n%s", err, implicit.LogTail(20))
		}
	}
	if o.fanoutOnly {
		res.Total = time.Since(start)
		prog.step("N=%d done in %s", n, res.Total.Round(time.Second))
		ok = true
		return res, nil
	}
	if err := b.measureAuthz(ctx, res); err != nil {
		return res, fmt.Errorf("authorization: %w", err)
	}
	prog.step("authz N=%d", n)
	if err := b.measureCopy(ctx, res); err != nil {
		return res, fmt.Errorf("copy: %w", err)
	}
	if err := b.measureMaterialize(ctx, res); err != nil {
		return res, fmt.Errorf("materialize: %w\n%s", err, implicit.LogTail(20))
	}
	if err := b.measurePolicies(ctx, res); err != nil {
		return res, fmt.Errorf("admission policy: %w\n%s", err, implicit.LogTail(20))
	}
	res.Total = time.Since(start)
	prog.step("N=%d done in %s", n, res.Total.Round(time.Second))
	ok = true
	return res, nil
}

// startBench starts a control plane in work (etcd, kube-apiserver with
// implicit-apiserver's authorization webhook) and implicit-apiserver behind
// the aggregator, and returns the bench with its clients and scrapers. On
// success the caller stops b.cp.
func startBench(ctx context.Context, o options, n int, prog *progress, work string) (_ *bench, err error) {
	start := time.Now()
	webhook, err := controlplane.PrepareAuthorizationWebhook(work, "implicit-apiserver", authz.Path,
		authz.MatchCondition(globalNS, []string{"kube-system", "kube-public", "kube-node-lease"}))
	if err != nil {
		return nil, err
	}
	kubeArgs := webhook.KubeAPIServerArgs
	if o.listRSS {
		// A 1,000,000-item list outlasts the default minute on a loaded
		// machine (-list-rss measures it to its end).
		kubeArgs = append(slices.Clone(kubeArgs), "--request-timeout="+listRequestTimeout)
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: o.binDir, WorkDir: work, KubeAPIServerArgs: kubeArgs, StopTimeout: o.stopTimeout})
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	matArgs, err := materializeArgs(o, work)
	if err != nil {
		return nil, err
	}
	args := slices.Concat([]string{"-v=1"}, cp.WebhookServerArgs(), matArgs, o.implicitArgs)
	if o.listRSS {
		args = append(args, "--request-timeout="+listRequestTimeout)
	}
	implicit, err := cp.StartAggregated(ctx, controlplane.AggregatedServerOptions{Binary: o.binary, Name: "implicit-apiserver", Port: webhook.Port, Args: args})
	if err != nil {
		return nil, fmt.Errorf("starting implicit-apiserver: %w\n%s", err, cp.LogTails(40))
	}
	if err := cp.RegisterAPIService(ctx, implicit.Port()); err != nil {
		return nil, fmt.Errorf("registering the APIService: %w\n%s", err, implicit.LogTail(40))
	}
	fmt.Printf("control plane and implicit-apiserver ready in %s\n", time.Since(start).Round(time.Millisecond))

	b := &bench{o: o, n: n, prog: prog, cp: cp, implicit: implicit}
	b.cfg = cp.AdminConfig()
	b.cfg.QPS, b.cfg.Burst = 1000, 2000
	if b.kube, err = kubernetes.NewForConfig(b.cfg); err != nil {
		return nil, err
	}
	if b.dyn, err = dynamic.NewForConfig(b.cfg); err != nil {
		return nil, err
	}
	if b.implicitSrv, err = b.newServer("implicit-apiserver", implicit.URL(), implicit.Process); err != nil {
		return nil, err
	}
	if b.kubeSrv, err = b.newServer("kube-apiserver", cp.APIServerURL(), cp.KubeAPIServer); err != nil {
		return nil, err
	}
	b.etcdSrv = &server{name: "etcd", process: cp.Etcd}
	return b, nil
}

func orgCount(n int) int { return max(1, n/100) }
