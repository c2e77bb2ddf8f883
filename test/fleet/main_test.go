package fleet

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

const globalNS = "implicit-global"

var (
	hub              *controlplane.ControlPlane
	member1, member2 *controlplane.ControlPlane
	implicit1        *controlplane.AggregatedServer
	implicit2        *controlplane.AggregatedServer
	// hubImplicit is the hub's own implicit-apiserver (--fleet-hub, no
	// guards registered): the views and the fleet's counts the plugin
	// reads on the hub.
	hubImplicit *controlplane.AggregatedServer
	// relay carries member-2's implicit-apiserver to the hub.
	relay *tcpRelay
	work  string
	// memberKubeconfigs are the members' hub identities (fleet:member:<name>,
	// with only artifacts/fleet/hub/rbac-member.yaml's RBAC), direct to the
	// hub, by member name.
	memberKubeconfigs = map[string]string{}
)

// reportInterval is the members' --fleet-report-interval.
const reportInterval = 2 * time.Second

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	binDir, binary := os.Getenv("IMPLICIT_TOOLS_BIN"), os.Getenv("IMPLICIT_BINARY")
	if binDir == "" || binary == "" {
		fmt.Fprintln(os.Stderr, "fleet tests need IMPLICIT_TOOLS_BIN and IMPLICIT_BINARY: run them with `make integration` (or `make test`)")
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	if work, err = os.MkdirTemp("", "implicit-fleet-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logf := func(who string) func(string, ...any) {
		return func(f string, a ...any) { fmt.Printf(who+": "+f+"\n", a...) }
	}
	config, err := filepath.Abs(filepath.Join("testdata", "implicit-config.yaml"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	start := time.Now()
	if hub, err = controlplane.Start(ctx, controlplane.Options{BinDir: binDir, WorkDir: filepath.Join(work, "hub"), Logf: logf("hub")}); err != nil {
		fmt.Fprintf(os.Stderr, "starting the hub: %v\n", err)
		return 1
	}
	defer hub.Stop()
	if relay, err = newTCPRelay(strings.TrimPrefix(hub.APIServerURL(), "https://")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer relay.close()
	// The hub's global namespace must exist before the members read it;
	// the hub's admin registers the members, with the identities they use
	// on the hub.
	if _, _, err := hub.Kubectl(ctx, "create", "namespace", globalNS); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := registerMembers(ctx, map[string]string{"member-1": "canary", "member-2": "main"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if hubImplicit, err = hub.StartAggregated(ctx, controlplane.AggregatedServerOptions{
		Binary: binary, Name: "implicit-apiserver",
		Args: append([]string{"-v=2", "--fleet-hub", "--webhook-configuration=", "--config=" + config}, hub.WebhookServerArgs()...),
	}); err != nil {
		fmt.Fprintf(os.Stderr, "starting the hub's implicit-apiserver: %v\n", err)
		return 1
	}
	if err := hub.RegisterAPIService(ctx, hubImplicit.Port()); err != nil {
		fmt.Fprintf(os.Stderr, "registering the hub's APIService: %v\n%s\n", err, hubImplicit.LogTail(30))
		return 1
	}
	relayed, err := rewriteServer(memberKubeconfigs["member-2"], hub.APIServerURL(), "https://"+relay.addr(), filepath.Join(work, "member-2-hub-via-relay.kubeconfig"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	startMember := func(name, hubKubeconfig string, extra ...string) (*controlplane.ControlPlane, *controlplane.AggregatedServer, error) {
		cp, err := controlplane.Start(ctx, controlplane.Options{
			BinDir: binDir, WorkDir: filepath.Join(work, name), Logf: logf(name),
			ExternalEtcdURL: hub.EtcdURL(), EtcdPrefix: "/" + name,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("starting %s: %w", name, err)
		}
		srv, err := cp.StartAggregated(ctx, controlplane.AggregatedServerOptions{
			Binary: binary, Name: "implicit-apiserver",
			Args: append(append([]string{"-v=2", "--global-kubeconfig=" + hubKubeconfig, "--global-cluster-name=hub", "--webhook-configuration=", "--config=" + config,
				"--fleet-member-name=" + name, "--fleet-report-interval=" + reportInterval.String()}, extra...),
				cp.WebhookServerArgs()...),
		})
		if err != nil {
			return cp, nil, fmt.Errorf("starting %s's implicit-apiserver: %w", name, err)
		}
		if err := cp.RegisterAPIService(ctx, srv.Port()); err != nil {
			return cp, srv, fmt.Errorf("registering %s's APIService: %w\n%s", name, err, srv.LogTail(30))
		}
		return cp, srv, nil
	}
	member1, implicit1, err = startMember("member-1", memberKubeconfigs["member-1"])
	if member1 != nil {
		defer member1.Stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// member-2 reads its sources through the relay, and reports directly.
	member2, implicit2, err = startMember("member-2", relayed, "--fleet-report-kubeconfig="+memberKubeconfigs["member-2"])
	if member2 != nil {
		defer member2.Stop()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("hub and two members ready in %s (work dir %s)\n", time.Since(start).Round(time.Millisecond), work)
	code := m.Run()
	if code != 0 {
		fmt.Printf("member-1 implicit-apiserver log tail:\n%s\nmember-2:\n%s\nlogs in %s\n", implicit1.LogTail(40), implicit2.LogTail(40), work)
		return code
	}
	member2.Stop()
	member1.Stop()
	hub.Stop()
	os.RemoveAll(work)
	return 0
}

// rewriteServer writes a copy of kubeconfig with server from replaced by to.
func rewriteServer(kubeconfig, from, to, out string) (string, error) {
	b, err := os.ReadFile(kubeconfig)
	if err != nil {
		return "", err
	}
	if !strings.Contains(string(b), from) {
		return "", fmt.Errorf("%s does not name %s", kubeconfig, from)
	}
	return out, os.WriteFile(out, []byte(strings.ReplaceAll(string(b), from, to)), 0o600)
}

// tcpRelay forwards connections on a loopback port to target. cut closes the
// listener and every connection (the member can't reach the hub); heal
// listens again on the same port.
type tcpRelay struct {
	target string
	port   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

func newTCPRelay(target string) (*tcpRelay, error) {
	r := &tcpRelay{target: target, conns: map[net.Conn]struct{}{}}
	if err := r.listen("127.0.0.1:0"); err != nil {
		return nil, err
	}
	_, r.port, _ = net.SplitHostPort(r.ln.Addr().String())
	return r, nil
}

func (r *tcpRelay) addr() string { return "127.0.0.1:" + r.port }

func (r *tcpRelay) listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.ln = ln
	r.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go r.forward(c)
		}
	}()
	return nil
}

func (r *tcpRelay) forward(c net.Conn) {
	up, err := net.DialTimeout("tcp", r.target, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	r.mu.Lock()
	r.conns[c], r.conns[up] = struct{}{}, struct{}{}
	r.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, c); done <- struct{}{} }()
	go func() { io.Copy(c, up); done <- struct{}{} }()
	<-done
	c.Close()
	up.Close()
	r.mu.Lock()
	delete(r.conns, c)
	delete(r.conns, up)
	r.mu.Unlock()
}

// cut stops relaying: new connections are refused, open ones closed.
func (r *tcpRelay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ln != nil {
		r.ln.Close()
		r.ln = nil
	}
	for c := range r.conns {
		c.Close()
	}
}

// heal relays again, on the same port.
func (r *tcpRelay) heal() error { return r.listen(r.addr()) }

func (r *tcpRelay) close() { r.cut() }

// registerMembers applies the MemberCluster CRD on the hub and, as the
// hub's admin would, registers each member with the label
// implicit.dev/cluster-stage=<stage> and gives it a hub identity
// (fleet:member:<name>, a client certificate) bound by
// artifacts/fleet/hub/rbac-member.yaml, plus reads of the suite's own
// configured kind (guardrails) in the global namespace.
func registerMembers(ctx context.Context, stages map[string]string) error {
	crd, err := filepath.Abs(filepath.Join("..", "..", "artifacts", "fleet", "hub", "crd-memberclusters.yaml"))
	if err != nil {
		return err
	}
	if _, _, err := hub.Kubectl(ctx, "apply", "-f", crd); err != nil {
		return err
	}
	if _, _, err := hub.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd/memberclusters.fleet.implicit.dev"); err != nil {
		return err
	}
	for name, stage := range stages {
		if err := registerMember(ctx, name, stage); err != nil {
			return err
		}
	}
	return nil
}

// registerMember registers one member (stage "": no label) and gives it
// its hub identity.
func registerMember(ctx context.Context, name, stage string) error {
	if err := registerMemberIdentity(ctx, name); err != nil {
		return err
	}
	return registerMemberCluster(ctx, name, stage)
}

// registerMemberIdentity binds the hub identity fleet:member:<name>, in the
// group implicit:fleet-members, with rbac-member.yaml (and reads of
// guardrails) and writes its kubeconfig into memberKubeconfigs.
func registerMemberIdentity(ctx context.Context, name string) error {
	rbac, err := os.ReadFile(filepath.Join("..", "..", "artifacts", "fleet", "hub", "rbac-member.yaml"))
	if err != nil {
		return err
	}
	user := "fleet:member:" + name
	// The suite's configured kind, read by every member.
	guardrails := fmt.Sprintf(`
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: fleet-member-guardrails, namespace: %[1]s}
rules:
- {apiGroups: [policy.example.com], resources: [guardrails], verbs: [get, list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: fleet-member-guardrails, namespace: %[1]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: fleet-member-guardrails}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "implicit:fleet-members"}
`, globalNS)
	manifest := strings.ReplaceAll(string(rbac), "MEMBER", name) + guardrails
	if _, _, err := hub.KubectlWithInput(ctx, strings.NewReader(manifest), "apply", "-f", "-"); err != nil {
		return err
	}
	path, err := hub.WriteUserKubeconfig(user, "implicit:fleet-members")
	if err != nil {
		return err
	}
	memberKubeconfigs[name] = path
	return nil
}

// registerMemberCluster creates the member's MemberCluster, as the hub's
// admin.
func registerMemberCluster(ctx context.Context, name, stage string) error {
	labels := ""
	if stage != "" {
		labels = fmt.Sprintf("\n  labels: {implicit.dev/cluster-stage: %s}", stage)
	}
	mc := fmt.Sprintf("apiVersion: fleet.implicit.dev/v1alpha1\nkind: MemberCluster\nmetadata:\n  name: %s%s\nspec: {}\n", name, labels)
	_, _, err := hub.KubectlWithInput(ctx, strings.NewReader(mc), "apply", "-f", "-")
	return err
}
