package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

// clusterSpec is one cluster for startCluster: make run's only one, or a
// fleet's hub or member.
type clusterSpec struct {
	// name prefixes the cluster's progress lines and process names; ""
	// for make run's single cluster.
	name    string
	workDir string
	// etcdURL and etcdPrefix put kube-apiserver's data in another
	// cluster's etcd (a member's, in the hub's); "" runs an etcd.
	etcdURL    string
	etcdPrefix string
	// implicit runs local-up's --implicit-binary behind the aggregation
	// layer, as kube-apiserver's authorization webhook and admission
	// guards, with implicitArgs beyond those every cluster gets.
	implicit     bool
	implicitArgs []string
	// before are files applied once the server's identity is, before
	// implicit-apiserver starts (a hub's MemberCluster CRD and the RBAC
	// to read it); a CRD among them is waited for until Established.
	before []string
	// examples is applied with kubectl apply -R once everything runs.
	examples string
}

// cluster is a running control plane and, if asked, its implicit-apiserver.
type cluster struct {
	name     string
	cp       *controlplane.ControlPlane
	implicit *controlplane.AggregatedServer // nil when not asked for
}

// startCluster brings up one cluster: kube-apiserver (configured for
// implicit-apiserver's authorization webhook when spec.implicit) on its own
// etcd or spec.etcdURL, kube-controller-manager unless
// --with-controller-manager=false, implicit-apiserver registered as the
// APIService, spec.examples, then the admission guards. ctx bounds the
// cluster's lifetime, not only its start. On error, whatever was started
// has been stopped.
func startCluster(ctx context.Context, o options, spec clusterSpec) (_ *cluster, err error) {
	c := &cluster{name: spec.name}
	workDir, err := filepath.Abs(spec.workDir)
	if err != nil {
		return nil, err
	}
	parts := []string{"etcd", "kube-apiserver"}
	if spec.etcdURL != "" {
		parts = []string{fmt.Sprintf("kube-apiserver (on the etcd at %s, prefix %s)", spec.etcdURL, spec.etcdPrefix)}
	}
	if o.withControllerManager {
		parts = append(parts, "kube-controller-manager")
	}
	c.say("starting %s from %s", joinAnd(parts), o.binDir)
	// kube-apiserver asks implicit-apiserver's authorization webhook after
	// Node and RBAC (inherited RoleBindings grant access): its port and
	// certificate are fixed before either starts.
	var webhook *controlplane.AuthorizationWebhook
	var apiserverArgs []string
	if spec.implicit {
		webhook, err = controlplane.PrepareAuthorizationWebhook(workDir, implicitName, authz.Path,
			authz.MatchCondition("implicit-global", []string{"kube-system", "kube-public", "kube-node-lease"}))
		if err != nil {
			return nil, fmt.Errorf("preparing the authorization webhook: %w", err)
		}
		apiserverArgs = webhook.KubeAPIServerArgs
	}
	c.cp, err = controlplane.Start(ctx, controlplane.Options{
		BinDir:                 o.binDir,
		WorkDir:                workDir,
		ExternalEtcdURL:        spec.etcdURL,
		EtcdPrefix:             spec.etcdPrefix,
		KubeAPIServerArgs:      apiserverArgs,
		StartControllerManager: o.withControllerManager,
		Logf:                   c.say,
	})
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.stop())
		}
	}()

	if o.implicitBinary == "" {
		c.say("WARNING: no --implicit-binary: implicit.dev is not served, only the control plane runs")
	} else if spec.implicit {
		// The webhooks answer this control plane's kube-apiserver only: it
		// presents the webhook client certificate (controlplane.Start).
		// It runs as its Deployment does, as the ServiceAccount with the
		// shipped RBAC and nothing more: a permission the chart lacks
		// fails here, and the admin's writes are not the server's own.
		id, err := c.applyIdentity(ctx, o)
		if err != nil {
			return nil, err
		}
		if err := c.applyBefore(ctx, spec.before); err != nil {
			return nil, err
		}
		args := append([]string{"--webhook-configuration=" + controlplane.GuardsConfiguration}, c.cp.WebhookServerArgs()...)
		args = append(args, id.Args()...)
		args = append(args, spec.implicitArgs...)
		if o.config != "" {
			args = append(args, "--config="+o.config)
		}
		c.say("starting %s", strings.Join(append([]string{o.implicitBinary}, args...), " "))
		// Named as the authorization webhook was prepared (its certificate
		// directory), whatever the binary's file is called.
		c.implicit, err = c.cp.StartAggregated(ctx, controlplane.AggregatedServerOptions{Binary: o.implicitBinary, Name: implicitName, Port: webhook.Port, Args: args})
		if err != nil {
			return nil, fmt.Errorf("starting implicit-apiserver: %w", err)
		}
		if err := c.cp.RegisterAPIService(ctx, c.implicit.Port()); err != nil {
			return nil, fmt.Errorf("registering implicit-apiserver with the aggregation layer (log %s): %w", c.implicit.LogPath(), err)
		}
	}
	// The mutating webhooks (parent-uid, own-copy) come before the
	// examples, so that their parent labels record their parents' uids;
	// they refuse nothing.
	if c.implicit != nil {
		c.say("registering the parent-uid and own-copy webhooks (MutatingWebhookConfiguration %s)", controlplane.GuardsConfiguration)
		if err := c.cp.RegisterParentUID(ctx, c.implicit); err != nil {
			return nil, fmt.Errorf("registering the mutating webhooks: %w", err)
		}
	}
	if err := c.applyExamples(ctx, spec.examples); err != nil {
		return nil, err
	}
	// The guards come after the examples: team-a's example shadows a locked
	// item on purpose, to show the conflict annotation, and the shadow guard
	// would refuse it.
	if c.implicit != nil {
		c.say("registering the admission guards (ValidatingWebhookConfiguration %s)", controlplane.GuardsConfiguration)
		if err := c.cp.RegisterGuards(ctx, c.implicit, servedSources()); err != nil {
			return nil, fmt.Errorf("registering the admission guards: %w", err)
		}
	}
	return c, nil
}

// stop stops everything the cluster runs.
func (c *cluster) stop() error {
	c.say("stopping everything (logs stay in %s/logs)", c.cp.WorkDir())
	if err := c.cp.Stop(); err != nil {
		return fmt.Errorf("%sstopping: %w", c.prefix(), err)
	}
	return nil
}

// watched is a process whose unexpected exit ends local-up.
type watched struct {
	exited  <-chan struct{}
	logTail func(int) string
}

// processes are the cluster's processes by name, prefixed by the cluster's
// name in a fleet.
func (c *cluster) processes() map[string]watched {
	out := map[string]watched{}
	add := func(name string, p *controlplane.Process) {
		if p != nil {
			out[c.prefix()+name] = watched{p.Exited(), p.LogTail}
		}
	}
	add("etcd", c.cp.Etcd()) // nil on another cluster's etcd
	add("kube-apiserver", c.cp.KubeAPIServer())
	add("kube-controller-manager", c.cp.ControllerManager())
	if c.implicit != nil {
		out[c.prefix()+"implicit-apiserver"] = watched{c.implicit.Process().Exited(), c.implicit.LogTail}
	}
	return out
}

// applyIdentity applies what artifacts/base ships for the server's
// identity (the Namespace implicit-system, the ServiceAccount
// implicit-apiserver, its ClusterRoles, Roles and bindings) and for users
// (the ClusterRoles that aggregate the views into admin, edit and view, and
// the questions into all three), with the ClusterRole that docs/configuration.md
// has users apply for a configured kind when --config's directory holds
// one (clusterrole.yaml, as artifacts/config/*/ do), and returns the
// identity: a kubeconfig of the ServiceAccount's.
func (c *cluster) applyIdentity(ctx context.Context, o options) (*controlplane.ServerIdentity, error) {
	var extra []string
	if o.config != "" {
		role := filepath.Join(filepath.Dir(o.config), configRole)
		if _, err := os.Stat(role); err == nil {
			extra = append(extra, role)
		} else {
			c.say("no %s beside %s: a kind it configures beyond the defaults needs a ClusterRole for the server (docs/configuration.md, \"RBAC for a configured kind\"), or the server's log says forbidden", configRole, o.config)
		}
	}
	// ApplyServerIdentity says what it applied (Options.Logf).
	id, err := c.cp.ApplyServerIdentity(ctx, o.artifacts, extra...)
	if err != nil {
		return nil, fmt.Errorf("applying the server's identity and RBAC from %s: %w", o.artifacts, err)
	}
	if !o.withControllerManager {
		c.say("WARNING: without kube-controller-manager nothing aggregates the shipped roles into admin, edit and view, or a configured kind's into the server's")
	}
	return id, nil
}

// configRole is the file, beside an ImplicitConfiguration, holding the
// ClusterRole that lets the server read its configured kinds.
const configRole = "clusterrole.yaml"

// applyExamples applies dir with kubectl apply -R. A few attempts allow for
// objects whose namespace or CRD is created by the same apply.
func (c *cluster) applyExamples(ctx context.Context, dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		c.say("no %s: no examples applied", dir)
		return nil
	}
	c.say("applying %s", dir)
	const attempts = 4
	for i := 1; ; i++ {
		stdout, _, err := c.cp.Kubectl(ctx, "apply", "-R", "-f", dir)
		fmt.Print(indent(stdout))
		if err == nil {
			return nil
		}
		if i == attempts || ctx.Err() != nil {
			return fmt.Errorf("applying examples from %s: %w", dir, err)
		}
		c.say("apply failed (attempt %d of %d), retrying: %v", i, attempts, err)
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// applyBefore applies files with kubectl apply -f, then waits for the
// CustomResourceDefinitions among them to be Established.
func (c *cluster) applyBefore(ctx context.Context, files []string) error {
	for _, f := range files {
		c.say("applying %s", f)
		stdout, _, err := c.cp.Kubectl(ctx, "apply", "-f", f)
		fmt.Print(indent(stdout))
		if err != nil {
			return fmt.Errorf("applying %s: %w", f, err)
		}
		if strings.HasPrefix(filepath.Base(f), "crd-") {
			if _, _, err := c.cp.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "-f", f); err != nil {
				return fmt.Errorf("waiting for %s to be Established: %w", f, err)
			}
		}
	}
	return nil
}

// prefix is "<name>: ", or "" for make run's single cluster.
func (c *cluster) prefix() string {
	if c.name == "" {
		return ""
	}
	return c.name + ": "
}

// say prints one progress line, prefixed with the cluster's name.
func (c *cluster) say(format string, args ...any) {
	say(strings.ReplaceAll(c.prefix(), "%", "%%")+format, args...)
}

// joinAnd joins ["a", "b", "c"] as "a, b and c".
func joinAnd(parts []string) string {
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// implicitName names implicit-apiserver's process (its log and certificate
// directory) in the work directory.
const implicitName = "implicit-apiserver"
