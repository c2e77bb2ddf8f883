package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

type options struct {
	binDir     string // etcd, kube-*, kubelet, helm
	image      string // OCI archive of implicit-apiserver
	imageTag   string // its tag, for the chart's image.tag
	pauseImage string // OCI archive of the pause image
	pauseRef   string // its containerd name, for sandbox_image
	runc       string // the runc binary containerd runs
	chart      string
	workDir    string
	nodeName   string
	timeout    time.Duration
	hold       bool
}

func main() {
	var o options
	flag.StringVar(&o.binDir, "bin-dir", "", "Directory printed by hack/build-tools.sh with etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and helm.")
	flag.StringVar(&o.image, "image", "_output/image/implicit-apiserver.tar", "OCI archive written by make image.")
	flag.StringVar(&o.imageTag, "image-tag", "", "Tag of the image in --image (make's VERSION); the chart's image.tag.")
	flag.StringVar(&o.pauseImage, "pause-image", "_output/e2e/pause.tar", "OCI archive of the sandbox image (hack/e2e/pause packaged by hack/image).")
	flag.StringVar(&o.pauseRef, "pause-ref", "docker.io/library/implicit-e2e-pause:1", "containerd name of the sandbox image in --pause-image.")
	flag.StringVar(&o.runc, "runc", "runc", "The runc binary for containerd's runc runtime (BinaryName).")
	flag.StringVar(&o.chart, "chart", "charts/implicit-apiserver", "The chart to install.")
	flag.StringVar(&o.workDir, "work-dir", "_output/e2e", "Work directory: PKI, logs, containerd's and kubelet's state.")
	flag.StringVar(&o.nodeName, "node-name", "implicit-e2e", "The node's name.")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "Bound on the whole run (before --hold).")
	flag.BoolVar(&o.hold, "hold", false, "Keep the cluster running after the checks until SIGINT or SIGTERM.")
	flag.Parse()
	if o.binDir == "" || o.imageTag == "" {
		fmt.Fprintln(os.Stderr, "e2e: --bin-dir and --image-tag are required")
		flag.Usage()
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e: needs root (containerd, kubelet, iptables)")
		os.Exit(2)
	}
	for _, p := range []*string{&o.image, &o.pauseImage, &o.chart, &o.workDir} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			os.Exit(2)
		}
		*p = abs
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: FAILED: %v\n", err)
		stop()
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Printf("%s e2e: %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// run brings the cluster up, runs the checks and tears everything down,
// whatever happened.
func run(ctx context.Context, o options) (err error) {
	if err := os.MkdirAll(filepath.Join(o.workDir, "logs"), 0o755); err != nil {
		return err
	}
	c := &cluster{o: o}
	defer func() {
		logf("tearing down")
		if cerr := c.teardown(); cerr != nil {
			logf("teardown: %v", cerr)
		}
	}()
	runCtx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := c.up(runCtx); err != nil {
		return err
	}
	if err := c.check(runCtx); err != nil {
		return err
	}
	logf("PASS: chart's pods Ready on kubelet %s, helm test passed, view read by a tenant through the aggregator, webhook answered from the pods", o.nodeName)
	if o.hold {
		logf("holding; KUBECONFIG=%s; Ctrl-C to stop", c.cp.KubeconfigPath())
		<-ctx.Done()
	}
	return nil
}
