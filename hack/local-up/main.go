package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// options are local-up's flags.
type options struct {
	binDir                string
	implicitBinary        string
	workDir               string
	examples              string
	artifacts             string
	config                string
	withControllerManager bool
	fleet                 bool
	fleetExamples         string
	fleetHub              string
	policyExample         string
}

func main() {
	var o options
	flag.StringVar(&o.binDir, "bin-dir", "", "directory with etcd, kube-apiserver and kube-controller-manager, as printed by hack/build-tools.sh (required)")
	flag.StringVar(&o.implicitBinary, "implicit-binary", "", "implicit-apiserver binary to run; without it only the control plane runs")
	flag.StringVar(&o.workDir, "work-dir", "_output/local-up", "directory for PKI, etcd data, logs and admin.kubeconfig; its etcd data is wiped on start")
	flag.StringVar(&o.examples, "examples", "artifacts/examples", "directory applied with `kubectl apply -R -f` once everything runs (skipped if missing)")
	flag.StringVar(&o.artifacts, "artifacts", "artifacts/base", "kustomization of the shipped manifests: its Namespace, ServiceAccount and RBAC are applied to every cluster running implicit-apiserver, which runs as that ServiceAccount")
	flag.StringVar(&o.config, "config", "", "ImplicitConfiguration file, passed to implicit-apiserver as --config")
	flag.StringVar(&o.policyExample, "policy-example", "artifacts/config/admission-policies", "the admission-policy example, whose policy, [Audit, Warn] binding and global parameter are applied when --config serves configmaps (docs/policies.md)")
	flag.BoolVar(&o.withControllerManager, "with-controller-manager", true, "also run kube-controller-manager (namespace deletion, garbage collection)")
	flag.BoolVar(&o.fleet, "fleet", false, "run a fleet instead of one cluster: a hub (in <work-dir>/hub) and members member-1 and member-2 (in <work-dir>/member-N) whose implicit-apiservers read the global sources from the hub; needs --implicit-binary")
	flag.StringVar(&o.fleetHub, "fleet-hub-artifacts", "artifacts/fleet/hub", "with --fleet: the hub's MemberCluster CRD and its server's RBAC to read them (applied before the hub's implicit-apiserver starts, with --fleet-hub)")
	flag.StringVar(&o.fleetExamples, "fleet-examples", "artifacts/fleet-examples", "with --fleet: its hub/ is applied to the hub, its member/ to each member (each skipped if missing)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "local-up: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if o.binDir == "" {
		fmt.Fprintln(os.Stderr, "local-up: --bin-dir is required (the directory hack/build-tools.sh prints)")
		os.Exit(2)
	}
	if o.fleet && o.implicitBinary == "" {
		fmt.Fprintln(os.Stderr, "local-up: --fleet needs --implicit-binary: a fleet without implicit-apiserver has nothing to show")
		os.Exit(2)
	}

	signals, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	run := runSingle
	if o.fleet {
		run = runFleet
	}
	if err := run(signals, stopSignals, o); err != nil {
		fmt.Fprintf(os.Stderr, "local-up: %v\n", err)
		os.Exit(1)
	}
}

// runSingle starts one cluster (make run), waits for a signal (signals is
// cancelled) or for a process to die, and stops everything. stopSignals
// restores the default signal handling, so that a second Ctrl-C during
// shutdown ends local-up at once (its processes die with it: see package
// controlplane).
func runSingle(signals context.Context, stopSignals func(), o options) (err error) {
	// A signal cancels signals, which stops everything in order (stop is
	// also deferred below, to wait for it and to cover the other returns).
	c, err := startCluster(signals, o, clusterSpec{
		workDir:  o.workDir,
		implicit: o.implicitBinary != "",
		examples: o.examples,
	})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, c.stop()) }()
	if c.implicit != nil {
		waitForDiscovery(signals, c.cp)
	}
	policies, err := servesConfigMaps(o.config)
	if err != nil {
		return err
	}
	if policies = policies && c.implicit != nil; policies {
		if err := applyPolicyExample(signals, c.cp, o.policyExample); err != nil {
			return err
		}
	}
	printTour(c.cp, c.implicit != nil, pluginDir(o.implicitBinary))
	if policies {
		printPolicyTour()
	}
	return waitForExit(signals, stopSignals, c)
}

// waitForExit waits for a signal or for a process of clusters to die, and
// restores the default signal handling: the caller then stops everything.
func waitForExit(signals context.Context, stopSignals func(), clusters ...*cluster) error {
	procs := map[string]watched{}
	for _, c := range clusters {
		for name, w := range c.processes() {
			procs[name] = w
		}
	}
	died := make(chan string, len(procs))
	for name, w := range procs {
		go func() {
			select {
			case <-w.exited:
				died <- name
			case <-signals.Done():
			}
		}()
	}
	select {
	case <-signals.Done():
	case name := <-died:
		// A process that exits because a signal is stopping everything did
		// not die unexpectedly.
		if signals.Err() == nil {
			return fmt.Errorf("%s exited unexpectedly; its log ends with:\n%s", name, procs[name].logTail(30))
		}
	}
	stopSignals()
	fmt.Println()
	say("interrupted (press Ctrl-C again to kill everything at once)")
	return nil
}

// printTour prints how to reach the cluster and a few commands to try;
// plugins is the directory holding kubectl-implicit.
func printTour(cp *controlplane.ControlPlane, served bool, plugins string) {
	fmt.Printf(`
Everything runs. In another terminal:

  export KUBECONFIG=%s

`, cp.KubeconfigPath())
	if served {
		fmt.Printf(`Try:

  kubectl api-resources --api-group=implicit.dev
  kubectl get rolebindings.implicit.dev -n team-a
  kubectl get implicit -n team-a
  kubectl get rolebindings.implicit.dev -A -l implicit.dev/scope=global
  kubectl get rolebindings.implicit.dev org-security-auditors -n team-a -o yaml   # the lock's conflict
  kubectl get rolebindings.implicit.dev -A -w      # then edit a global source in another terminal:
  kubectl label rolebinding ci-bot -n implicit-global tier=org                    # warns how many namespaces it reaches
  kubectl auth can-i list pods -n team-a --as=someone --as-group=platform:viewers # granted by org-platform's binding
  kubectl create rolebinding org-security-auditors -n team-b --clusterrole=view --group=x  # refused: shadows a lock

The kubectl plugin (built by make build) answers the questions labels only hint at:

  export PATH=%s:$PATH
  kubectl implicit why rolebinding org-security-auditors -n team-a   # which scopes, what the lock blocked
  kubectl implicit why rolebinding ci-bot -n team-b                  # why it is not there: an exclusion
  kubectl implicit tree                                              # the hierarchy, problems marked
  kubectl implicit reach rolebinding ci-bot -n implicit-global       # which namespaces see it

A tenant, platform:admins (admin of org-platform, inherited by team-a and team-b), for its namespaces:

  kubectl get implicit -n team-a --as=pat --as-group=platform:admins
  kubectl implicit why rolebinding ci-bot -n team-b --as=pat --as-group=platform:admins
  kubectl implicit tree org-platform --as=pat --as-group=platform:admins

`, plugins)
	}
	fmt.Printf("Logs: %s/logs. Press Ctrl-C to stop everything.\n", cp.WorkDir())
}

// pluginDir is the directory make build writes kubectl-implicit to: the
// implicit-apiserver binary's, as an absolute path.
func pluginDir(implicitBinary string) string {
	dir, err := filepath.Abs(filepath.Dir(implicitBinary))
	if err != nil {
		return filepath.Dir(implicitBinary)
	}
	return dir
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "   " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n   ") + "\n"
}

// say prints one progress line.
func say(format string, args ...any) {
	fmt.Printf(">> "+format+"\n", args...)
}

// servedSources are the source resources of the default views, which the
// guards watch over.
func servedSources() []schema.GroupResource {
	var out []schema.GroupResource
	for _, k := range kinds.BuiltIns() {
		out = append(out, k.Source.GroupResource())
	}
	return out
}

// waitForDiscovery waits until `kubectl get implicit` works for someone
// whose kubectl has nothing cached: the APIService turns Available, and
// kube-apiserver's aggregated discovery lists implicit.dev only at
// kube-aggregator's next discovery refresh, up to about 20 s later; a
// `kubectl get implicit` in between fails with "the server doesn't have a
// resource type". kubectl is the oracle: each attempt runs it with a fresh,
// empty --cache-dir, as a user's first kubectl does. It says so every 20 s
// while it waits, and gives up after two minutes, saying so (the tour is
// printed all the same).
func waitForDiscovery(ctx context.Context, cp *controlplane.ControlPlane) {
	const (
		every   = time.Second
		sayEach = 20 * time.Second
		limit   = 2 * time.Minute
	)
	start := time.Now()
	lastSaid := start
	var last error
	for {
		if last = kubectlGetImplicit(ctx, cp); last == nil {
			if waited := time.Since(start); waited > every {
				say("kubectl's discovery lists implicit.dev (after %s)", waited.Round(time.Second))
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > limit {
			say("WARNING: after %s, `kubectl get implicit` still fails with a fresh discovery cache; kubectl may not know the views for a while: %v", limit, last)
			return
		}
		if time.Since(lastSaid) >= sayEach {
			say("waiting until kube-apiserver's discovery lists implicit.dev (kubectl get implicit fails until then): %s so far", time.Since(start).Round(time.Second))
			lastSaid = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// kubectlGetImplicit runs `kubectl get implicit -n default` as admin with
// an empty discovery cache of its own.
func kubectlGetImplicit(ctx context.Context, cp *controlplane.ControlPlane) error {
	cache, err := os.MkdirTemp("", "local-up-kubectl-cache-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(cache)
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, _, err = cp.Kubectl(ctx, "--cache-dir="+cache, "get", "implicit", "-n", "default", "-o", "name")
	return err
}
