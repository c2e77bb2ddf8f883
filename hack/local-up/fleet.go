package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
)

// A fleet (make run-fleet) is a hub cluster, which holds the global sources
// and runs a plain implicit-apiserver of its own with --fleet-hub (its
// guards: the hub's locks need unlock; its members' reports counted), and
// member clusters, each with its implicit-apiserver reading the global
// scope from the hub, registered on the hub as MemberClusters. The
// members' kube-apiservers keep their data in the hub's etcd, each under
// its own prefix: three clusters for the price of one etcd.
const (
	// hubName is the hub's directory, kubeconfig name and
	// --global-cluster-name.
	hubName = "hub"
	// fleetMemberCount is how many members run: member-1, member-2, ...
	fleetMemberCount = 2
)

// globalFlags are the implicit-apiserver flags a fleet needs: a member's,
// and the hub's --fleet-hub.
var globalFlags = []string{"--global-kubeconfig", "--global-cluster-name", "--fleet-hub"}

// memberNameFlag names a member in its reports to the hub; a binary
// without it runs members that don't report (their MemberClusters stay
// Unreported).
const memberNameFlag = "--fleet-member-name"

// memberStages are the implicit.dev/cluster-stage labels the hub's admin
// registers member-1, member-2, ... with: the first is the canary cluster.
var memberStages = []string{"canary", "main"}

// runFleet starts the hub, then the members, writes a kubeconfig per
// cluster to <work-dir>/<name>.kubeconfig, prints the tour and waits for a
// signal or for a process to die, like runSingle. It stops the members
// first and the hub last.
func runFleet(signals context.Context, stopSignals func(), o options) (err error) {
	reports, err := checkGlobalFlags(signals, o.implicitBinary)
	if err != nil {
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
		name:         hubName,
		workDir:      filepath.Join(workDir, hubName),
		implicit:     true,
		implicitArgs: []string{"--fleet-hub"},
		before: []string{
			filepath.Join(o.fleetHub, "crd-memberclusters.yaml"),
			filepath.Join(o.fleetHub, "clusterrole-hub-server.yaml"),
			filepath.Join(o.fleetHub, "clusterrolebinding-hub-server.yaml"),
		},
		examples: filepath.Join(o.fleetExamples, "hub"),
	})
	stopHubOnSignal()
	if err != nil {
		return fmt.Errorf("%s: %w", hubName, err)
	}
	defer func() { err = errors.Join(err, hub.stop()) }()
	if err := registerMembers(signals, hub, filepath.Join(workDir, hubName)); err != nil {
		return err
	}
	if !reports {
		hub.say("WARNING: %s has no %s flag: the members won't report to the hub (kubectl implicit fleet status shows them Unreported)", o.implicitBinary, memberNameFlag)
	}

	clusters := []*cluster{hub}
	for i := 1; i <= fleetMemberCount; i++ {
		name := fmt.Sprintf("member-%d", i)
		args := []string{
			"--global-kubeconfig=" + hub.cp.KubeconfigPath(),
			"--global-cluster-name=" + hubName,
		}
		if reports {
			args = append(args, memberNameFlag+"="+name)
		}
		var member *cluster
		member, err = startCluster(signals, o, clusterSpec{
			name:         name,
			workDir:      filepath.Join(workDir, name),
			etcdURL:      hub.cp.EtcdURL(),
			etcdPrefix:   "/" + name,
			implicit:     true,
			implicitArgs: args,
			examples:     filepath.Join(o.fleetExamples, "member"),
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
// the flags a fleet needs; reports says whether its members can report to
// the hub (memberNameFlag).
func checkGlobalFlags(ctx context.Context, binary string) (reports bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "--help").CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("%s --help: %w: %s", binary, err, out)
	}
	for _, f := range globalFlags {
		if !strings.Contains(string(out), f) {
			return false, fmt.Errorf("%s has no %s flag, which a fleet needs (rebuild it: make build)", binary, f)
		}
	}
	return strings.Contains(string(out), memberNameFlag), nil
}

// registerMembers registers member-1, member-2, ... on the hub as its admin
// does: a MemberCluster each, labelled implicit.dev/cluster-stage (what a
// hub candidate's implicit.dev/canary-clusters selects on). The file is
// kept in dir, to read.
func registerMembers(ctx context.Context, hub *cluster, dir string) error {
	var b strings.Builder
	for i := 1; i <= fleetMemberCount; i++ {
		stage := memberStages[min(i, len(memberStages))-1]
		fmt.Fprintf(&b, "---\napiVersion: %s\nkind: %s\nmetadata:\n  name: member-%d\n  labels:\n    %s: %s\n",
			fleetv1alpha1.GroupVersionKind.GroupVersion(), fleetv1alpha1.Kind, i, clusterStageLabel, stage)
	}
	file := filepath.Join(dir, "memberclusters.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		return err
	}
	hub.say("registering the members (%s)", file)
	stdout, _, err := hub.cp.Kubectl(ctx, "apply", "-f", file)
	fmt.Print(indent(stdout))
	if err != nil {
		return fmt.Errorf("registering the members on the hub: %w", err)
	}
	return nil
}

// clusterStageLabel is the member label the fleet's examples select on.
const clusterStageLabel = "implicit.dev/cluster-stage"

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
	fmt.Fprintf(&b, "\nEverything runs. The fleet: the hub holds the global sources (namespace implicit-global) and guards them with an\n")
	fmt.Fprintf(&b, "implicit-apiserver of its own (--fleet-hub); each member's implicit-apiserver reads them from there,\n")
	fmt.Fprintf(&b, "and the hub knows its members (memberclusters.fleet.implicit.dev). Admin kubeconfigs, one per cluster:\n\n")
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
  # the fleet from the hub: each member's served revision, lag, staleness and last report; one source across the members
  kubectl implicit --kubeconfig %[1]s fleet status
  kubectl implicit --kubeconfig %[1]s fleet status rolebinding ci-bot -n implicit-global
  # the fan-out warning on the hub counts the members' namespaces ("reaches N namespaces in 3 clusters")
  kubectl --kubeconfig %[1]s annotate rolebinding ci-bot -n implicit-global note=fleet --dry-run=server
  # the hub's locks hold on the hub too: an admin of implicit-global without the verb unlock can't change org-security-auditors
  kubectl --kubeconfig %[1]s create rolebinding alice-admin -n implicit-global --clusterrole=admin --user=alice
  kubectl --kubeconfig %[1]s label rolebinding org-security-auditors -n implicit-global tier=org --as=alice

`, hub, m1, m2, driftColumns)
	fmt.Fprintf(&b, "Logs: %s/<cluster>/logs. Press Ctrl-C to stop everything.\n", workDir)
	fmt.Print(b.String())
}
