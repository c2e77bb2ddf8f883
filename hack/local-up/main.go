// Command local-up runs implicit-apiserver behind a local control plane on
// 127.0.0.1, for `make run`: etcd (empty on every run), kube-apiserver with
// the aggregation layer, optionally kube-controller-manager, and
// implicit-apiserver registered as the APIService v1alpha1.implicit.dev. It
// applies the examples, prints how to use the cluster with kubectl, and
// stays in the foreground until interrupted, then stops everything it
// started.
//
//	go run ./hack/local-up --bin-dir="$(hack/build-tools.sh)" --implicit-binary=_output/bin/implicit-apiserver
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

	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
	"github.com/implicit-dev/implicit-apiserver/test/controlplane"
)

// options are local-up's flags.
type options struct {
	binDir                string
	implicitBinary        string
	workDir               string
	examples              string
	config                string
	withControllerManager bool
}

func main() {
	var o options
	flag.StringVar(&o.binDir, "bin-dir", "", "directory with etcd, kube-apiserver and kube-controller-manager, as printed by hack/build-tools.sh (required)")
	flag.StringVar(&o.implicitBinary, "implicit-binary", "", "implicit-apiserver binary to run; without it only the control plane runs")
	flag.StringVar(&o.workDir, "work-dir", "_output/local-up", "directory for PKI, etcd data, logs and admin.kubeconfig; its etcd data is wiped on start")
	flag.StringVar(&o.examples, "examples", "artifacts/examples", "directory applied with `kubectl apply -R -f` once everything runs (skipped if missing)")
	flag.StringVar(&o.config, "config", "", "ImplicitConfiguration file, passed to implicit-apiserver as --config")
	flag.BoolVar(&o.withControllerManager, "with-controller-manager", true, "also run kube-controller-manager (namespace deletion, garbage collection)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "local-up: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if o.binDir == "" {
		fmt.Fprintln(os.Stderr, "local-up: --bin-dir is required (the directory hack/build-tools.sh prints)")
		os.Exit(2)
	}

	signals, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	if err := run(signals, stopSignals, o); err != nil {
		fmt.Fprintf(os.Stderr, "local-up: %v\n", err)
		os.Exit(1)
	}
}

// run starts everything, waits for a signal (signals is cancelled) or for a
// process to die, and stops everything. stopSignals restores the default
// signal handling, so that a second Ctrl-C during shutdown ends local-up at
// once (its processes die with it: see package controlplane).
func run(signals context.Context, stopSignals func(), o options) (err error) {
	what := "etcd and kube-apiserver"
	if o.withControllerManager {
		what = "etcd, kube-apiserver and kube-controller-manager"
	}
	say("starting %s from %s", what, o.binDir)
	// A signal cancels signals, which stops everything in order (Stop is
	// also deferred below, to wait for it and to cover the other returns).
	// kube-apiserver asks implicit-apiserver's authorization webhook after
	// Node and RBAC (inherited RoleBindings grant access): its port and
	// certificate are fixed before either starts.
	var webhook *controlplane.AuthorizationWebhook
	var apiserverArgs []string
	if o.implicitBinary != "" {
		workDir, err := filepath.Abs(o.workDir)
		if err != nil {
			return err
		}
		webhook, err = controlplane.PrepareAuthorizationWebhook(workDir, "implicit-apiserver", authz.Path,
			authz.MatchCondition("implicit-global", []string{"kube-system", "kube-public", "kube-node-lease"}))
		if err != nil {
			return fmt.Errorf("preparing the authorization webhook: %w", err)
		}
		apiserverArgs = webhook.KubeAPIServerArgs
	}
	cp, err := controlplane.Start(signals, controlplane.Options{
		BinDir:                 o.binDir,
		WorkDir:                o.workDir,
		KubeAPIServerArgs:      apiserverArgs,
		StartControllerManager: o.withControllerManager,
		Logf:                   say,
	})
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() {
		say("stopping everything (logs stay in %s/logs)", cp.WorkDir())
		if stopErr := cp.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping: %w", stopErr))
		}
	}()

	var implicit *controlplane.AggregatedServer
	if o.implicitBinary == "" {
		say("WARNING: no --implicit-binary: implicit.dev is not served, only the control plane runs")
	} else {
		args := []string{"--webhook-configuration=" + controlplane.GuardsConfiguration}
		if o.config != "" {
			args = append(args, "--config="+o.config)
		}
		say("starting %s", strings.Join(append([]string{o.implicitBinary}, args...), " "))
		implicit, err = cp.StartAggregated(signals, controlplane.AggregatedServerOptions{Binary: o.implicitBinary, Port: webhook.Port, Args: args})
		if err != nil {
			return fmt.Errorf("starting implicit-apiserver: %w", err)
		}
		if err := cp.RegisterAPIService(signals, implicit.Port()); err != nil {
			return fmt.Errorf("registering implicit-apiserver with the aggregation layer (log %s): %w", implicit.LogPath(), err)
		}
	}
	if err := applyExamples(signals, cp, o.examples); err != nil {
		return err
	}
	// The guards come after the examples: team-a's example shadows a locked
	// item on purpose, to show the conflict annotation, and the shadow guard
	// would refuse it.
	if implicit != nil {
		say("registering the admission guards (ValidatingWebhookConfiguration %s)", controlplane.GuardsConfiguration)
		if err := cp.RegisterGuards(signals, implicit, servedSources()); err != nil {
			return fmt.Errorf("registering the admission guards: %w", err)
		}
	}

	printTour(cp, implicit != nil)

	exited := map[string]<-chan struct{}{
		"etcd":           cp.Etcd().Exited(),
		"kube-apiserver": cp.KubeAPIServer().Exited(),
	}
	logs := map[string]func(int) string{
		"etcd":           cp.Etcd().LogTail,
		"kube-apiserver": cp.KubeAPIServer().LogTail,
	}
	if p := cp.ControllerManager(); p != nil {
		exited["kube-controller-manager"], logs["kube-controller-manager"] = p.Exited(), p.LogTail
	}
	if implicit != nil {
		exited["implicit-apiserver"], logs["implicit-apiserver"] = implicit.Process().Exited(), implicit.LogTail
	}
	died := make(chan string, len(exited))
	for name, ch := range exited {
		go func() {
			select {
			case <-ch:
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
			return fmt.Errorf("%s exited unexpectedly; its log ends with:\n%s", name, logs[name](30))
		}
	}
	stopSignals()
	fmt.Println()
	say("interrupted (press Ctrl-C again to kill everything at once)")
	return nil
}

// applyExamples applies dir with kubectl apply -R. A few attempts allow for
// objects whose namespace or CRD is created by the same apply.
func applyExamples(ctx context.Context, cp *controlplane.ControlPlane, dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		say("no %s: no examples applied", dir)
		return nil
	}
	say("applying %s", dir)
	const attempts = 4
	for i := 1; ; i++ {
		stdout, _, err := cp.Kubectl(ctx, "apply", "-R", "-f", dir)
		fmt.Print(indent(stdout))
		if err == nil {
			return nil
		}
		if i == attempts || ctx.Err() != nil {
			return fmt.Errorf("applying examples from %s: %w", dir, err)
		}
		say("apply failed (attempt %d of %d), retrying: %v", i, attempts, err)
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// printTour prints how to reach the cluster and a few commands to try.
func printTour(cp *controlplane.ControlPlane, served bool) {
	fmt.Printf(`
Everything runs. In another terminal:

  export KUBECONFIG=%s

`, cp.KubeconfigPath())
	if served {
		fmt.Print(`Try:

  kubectl api-resources --api-group=implicit.dev
  kubectl get rolebindings.implicit.dev -n team-a
  kubectl get implicit -n team-a
  kubectl get rolebindings.implicit.dev -A -l implicit.dev/scope=global
  kubectl get rolebindings.implicit.dev org-security-auditors -n team-a -o yaml   # the lock's conflict
  kubectl get rolebindings.implicit.dev -A -w      # then edit a global source in another terminal:
  kubectl label rolebinding ci-bot -n implicit-global tier=org                    # warns how many namespaces it reaches
  kubectl auth can-i list pods -n team-a --as=someone --as-group=platform:viewers # granted by org-platform's binding
  kubectl create rolebinding org-security-auditors -n team-b --clusterrole=view --group=x  # refused: shadows a lock

`)
	}
	fmt.Printf("Logs: %s/logs. Press Ctrl-C to stop everything.\n", cp.WorkDir())
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
	for _, k := range registry.DefaultKinds() {
		out = append(out, k.Source.GroupResource())
	}
	return out
}
