package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// A fleet (make run-fleet) is a hub cluster, which holds the global sources
// and runs no implicit-apiserver, and member clusters, each with its
// implicit-apiserver reading the global scope from the hub. The members'
// kube-apiservers keep their data in the hub's etcd, each under its own
// prefix: three clusters for the price of one etcd.
const (
	// hubName is the hub's directory, kubeconfig name and
	// --global-cluster-name.
	hubName = "hub"
	// fleetMemberCount is how many members run: member-1, member-2, ...
	fleetMemberCount = 2
)

// globalFlags are the implicit-apiserver flags a member needs.
var globalFlags = []string{"--global-kubeconfig", "--global-cluster-name"}

// runFleet starts the hub, then the members, writes a kubeconfig per
// cluster to <work-dir>/<name>.kubeconfig, prints the tour and waits for a
// signal or for a process to die, like runSingle. It stops the members
// first and the hub last.
func runFleet(signals context.Context, stopSignals func(), o options) (err error) {
	if err := checkGlobalFlags(signals, o.implicitBinary); err != nil {
		return err
	}
	workDir, err := filepath.Abs(o.workDir)
	if err != nil {
		return err
	}

	// The hub runs the etcd of every member, and a kube-apiserver whose
	// etcd is gone hangs in its shutdown: the hub stops last. A signal
	// stops it directly only while it starts; afterwards a signal stops
	// the members (their context is signals) and the hub stops in the
	// deferred call below, which runs after the members' ones.
	hubCtx, cancelHub := context.WithCancel(context.WithoutCancel(signals))
	defer cancelHub()
	stopHubOnSignal := context.AfterFunc(signals, cancelHub)
	hub, err := startCluster(hubCtx, o, clusterSpec{
		name:     hubName,
		workDir:  filepath.Join(workDir, hubName),
		examples: filepath.Join(o.fleetExamples, "hub"),
	})
	stopHubOnSignal()
	if err != nil {
		return fmt.Errorf("%s: %w", hubName, err)
	}
	defer func() { err = errors.Join(err, hub.stop()) }()

	clusters := []*cluster{hub}
	for i := 1; i <= fleetMemberCount; i++ {
		name := fmt.Sprintf("member-%d", i)
		var member *cluster
		member, err = startCluster(signals, o, clusterSpec{
			name:       name,
			workDir:    filepath.Join(workDir, name),
			etcdURL:    hub.cp.EtcdURL(),
			etcdPrefix: "/" + name,
			implicit:   true,
			implicitArgs: []string{
				"--global-kubeconfig=" + hub.cp.KubeconfigPath(),
				"--global-cluster-name=" + hubName,
			},
			examples: filepath.Join(o.fleetExamples, "member"),
		})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		defer func() { err = errors.Join(err, member.stop()) }()
		clusters = append(clusters, member)
	}

	kubeconfigs := make([]string, len(clusters))
	for i, c := range clusters {
		kubeconfigs[i] = filepath.Join(workDir, c.name+".kubeconfig")
		if err := writeNamedKubeconfig(c.cp.KubeconfigPath(), kubeconfigs[i], c.name); err != nil {
			return err
		}
	}
	for _, c := range clusters {
		if c.implicit != nil {
			waitForDiscovery(signals, c.cp)
		}
	}
	printFleetTour(workDir, clusters, kubeconfigs)
	return waitForExit(signals, stopSignals, clusters...)
}

// checkGlobalFlags fails early, before anything starts, when binary lacks
// the flags a member needs.
func checkGlobalFlags(ctx context.Context, binary string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "--help").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --help: %w: %s", binary, err, out)
	}
	for _, f := range globalFlags {
		if !strings.Contains(string(out), f) {
			return fmt.Errorf("%s has no %s flag, which a fleet's members need (rebuild it: make build)", binary, f)
		}
	}
	return nil
}

// writeNamedKubeconfig copies the admin kubeconfig src to dst with its
// cluster, user and context named after the cluster, so that the fleet's
// kubeconfigs can be merged (KUBECONFIG=hub.kubeconfig:member-1.kubeconfig
// kubectl --context=member-1 ...) without one cluster's entries hiding
// another's.
func writeNamedKubeconfig(src, dst, name string) error {
	cfg, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	cur := cfg.Contexts[cfg.CurrentContext]
	if cur == nil || cfg.Clusters[cur.Cluster] == nil || cfg.AuthInfos[cur.AuthInfo] == nil {
		return fmt.Errorf("%s: its current context %q is incomplete", src, cfg.CurrentContext)
	}
	user := name + "-admin"
	out := clientcmdapi.NewConfig()
	out.Clusters[name] = cfg.Clusters[cur.Cluster]
	out.AuthInfos[user] = cfg.AuthInfos[cur.AuthInfo]
	out.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	out.CurrentContext = name
	if err := clientcmd.WriteToFile(*out, dst); err != nil {
		return fmt.Errorf("writing %s: %w", dst, err)
	}
	return nil
}

// driftColumns are the drift report's columns (docs/fleets.md): per
// namespace and global item, the hub resourceVersion the member serves and
// since when, if ever, it has been unable to read the hub.
const driftColumns = `NAMESPACE:.metadata.namespace,NAME:.metadata.name,SOURCE-RV:.metadata.annotations.implicit\.dev/source-resource-version,CLUSTER:.metadata.annotations.implicit\.dev/source-cluster,STALE:.metadata.annotations.implicit\.dev/source-stale-since`

// printFleetTour prints the kubeconfigs and a few commands to try; clusters
// and kubeconfigs are the hub's first, then the members'.
func printFleetTour(workDir string, clusters []*cluster, kubeconfigs []string) {
	var b strings.Builder
	hub, m1, m2 := kubeconfigs[0], kubeconfigs[1], kubeconfigs[len(kubeconfigs)-1]
	fmt.Fprintf(&b, "\nThe fleet runs: the hub holds the global sources (namespace implicit-global); each member's\n")
	fmt.Fprintf(&b, "implicit-apiserver reads them from there. Admin kubeconfigs, one per cluster:\n\n")
	for i, c := range clusters {
		fmt.Fprintf(&b, "  %-9s %s\n", c.name, kubeconfigs[i])
	}
	fmt.Fprintf(&b, "\n(Their contexts are named after the clusters: KUBECONFIG=%s kubectl --context=%s ... works too.)\n",
		strings.Join(kubeconfigs, ":"), clusters[1].name)
	fmt.Fprintf(&b, `
Try, in another terminal:

  # the global sources, on the hub
  kubectl --kubeconfig %[1]s get rolebindings -n implicit-global
  # a member's view: ci-bot and org-security-auditors from the hub (SCOPE global), org-viewers from its own org-platform
  kubectl --kubeconfig %[2]s get rolebindings.implicit.dev -n team-a
  kubectl --kubeconfig %[2]s get rolebindings.implicit.dev ci-bot -n team-a -o yaml   # implicit.dev/source-cluster: hub
  # the drift report, on each member: the hub resourceVersion every inheriting namespace serves
  kubectl --kubeconfig %[2]s get rolebindings.implicit.dev -A -l implicit.dev/scope=global -o custom-columns='%[4]s'
  kubectl --kubeconfig %[3]s get rolebindings.implicit.dev -A -l implicit.dev/scope=global -o custom-columns='%[4]s'
  # edit a global source once, on the hub: every member's views follow (watch one, then run the drift report again)
  kubectl --kubeconfig %[2]s get rolebindings.implicit.dev -A -w
  kubectl --kubeconfig %[1]s label rolebinding ci-bot -n implicit-global tier=org
  # a hub RoleBinding grants in a member, through the member's implicit-apiserver (authorization webhook)
  kubectl --kubeconfig %[3]s auth can-i list pods -n team-b --as=someone --as-group=org:security

`, hub, m1, m2, driftColumns)
	fmt.Fprintf(&b, "Logs: %s/<cluster>/logs. Press Ctrl-C to stop everything.\n", workDir)
	fmt.Print(b.String())
}
