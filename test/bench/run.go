package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/implicit-dev/implicit-apiserver/test/controlplane"
)

const globalNS = "implicit-global"

// bench holds the running cluster and the clients every phase shares.
type bench struct {
	o        options
	cp       *controlplane.ControlPlane
	implicit *controlplane.AggregatedServer
	cfg      *rest.Config // admin, QPS 500, Burst 1000
	kube     kubernetes.Interface
	dyn      dynamic.Interface

	orgs, tenants []string
}

func run(ctx context.Context, o options) error {
	work, err := os.MkdirTemp("", "implicit-bench-")
	if err != nil {
		return err
	}
	fmt.Printf("bench: N=%d tenant namespaces (+%d orgs), G=%d global RoleBindings, R=%d runs; work dir %s\n",
		o.namespaces, orgCount(o.namespaces), o.globals, o.runs, work)

	start := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: o.binDir, WorkDir: work})
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	ok := false
	defer func() {
		cp.Stop()
		if ok && !o.keepWorkDir {
			os.RemoveAll(work)
		} else {
			fmt.Printf("logs kept in %s/logs\n", work)
		}
	}()
	implicit, err := cp.StartAggregated(ctx, controlplane.AggregatedServerOptions{Binary: o.binary, Name: "implicit-apiserver", Args: []string{"-v=1"}})
	if err != nil {
		return fmt.Errorf("starting implicit-apiserver: %w\n%s", err, cp.LogTails(40))
	}
	if err := cp.RegisterAPIService(ctx, implicit.Port()); err != nil {
		return fmt.Errorf("registering the APIService: %w\n%s", err, implicit.LogTail(40))
	}
	fmt.Printf("control plane and implicit-apiserver ready in %s\n", time.Since(start).Round(time.Millisecond))

	b := &bench{o: o, cp: cp, implicit: implicit}
	b.cfg = cp.AdminConfig()
	b.cfg.QPS, b.cfg.Burst = 500, 1000
	if b.kube, err = kubernetes.NewForConfig(b.cfg); err != nil {
		return err
	}
	if b.dyn, err = dynamic.NewForConfig(b.cfg); err != nil {
		return err
	}

	if err := b.setup(ctx); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	b.memory(ctx, "after setup")
	if err := b.reads(ctx); err != nil {
		return fmt.Errorf("reads: %w", err)
	}
	implicitMedian, err := b.implicitPropagation(ctx)
	if err != nil {
		return fmt.Errorf("implicit propagation: %w\n%s", err, implicit.LogTail(20))
	}
	if err := b.copyPropagation(ctx, implicitMedian); err != nil {
		return fmt.Errorf("copy propagation: %w", err)
	}
	b.memory(ctx, "at the end (copies in every tenant)")
	ok = true
	return nil
}

func orgCount(n int) int { return max(1, n/100) }
