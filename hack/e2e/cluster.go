package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

const (
	// stateDir holds containerd's state and socket; a short path, for the
	// unix socket's length limit.
	stateDir = "/run/implicit-e2e"
	// podSubnet and bridgeName are the pods' network (CNI bridge plugin),
	// away from podman's 10.88.0.0/16 and the service range 10.0.0.0/24.
	podSubnet  = "10.244.0.0/24"
	bridgeName = "implicit-e2e0"
	// kubernetesServiceIP is the "kubernetes" Service's ClusterIP
	// (internal/controlplane's --service-cluster-ip-range 10.0.0.0/24): what
	// in-cluster clients dial. There is no kube-proxy; one DNAT rule sends
	// it to kube-apiserver on 127.0.0.1.
	kubernetesServiceIP = "10.0.0.1"
	releaseName         = "implicit-apiserver"
	releaseNamespace    = "implicit-system"
)

// cluster is the one-node cluster and what it takes to tear it down.
type cluster struct {
	o          options
	cp         *controlplane.ControlPlane
	containerd *proc
	scheduler  *proc
	kubelet    *proc
	socket     string
	dnatRule   []string // iptables -t nat rule spec, when added
	localnet   string   // net.ipv4.conf.all.route_localnet before, when changed
	helmDone   bool
}

func (c *cluster) helm() string { return filepath.Join(c.o.binDir, "helm") }

func (c *cluster) up(ctx context.Context) error {
	o := c.o
	cpDir := filepath.Join(o.workDir, "controlplane")
	pki := filepath.Join(cpDir, "pki")
	var err error
	c.cp, err = controlplane.Start(context.WithoutCancel(ctx), controlplane.Options{
		BinDir:  o.binDir,
		WorkDir: cpDir,
		KubeAPIServerArgs: []string{
			// Pods run here: they need their ServiceAccount's token.
			"--disable-admission-plugins=",
			// The aggregation layer and the webhooks dial the pods' IPs
			// (EndpointSlices): there is no kube-proxy for ClusterIPs.
			"--enable-aggregator-routing=true",
		},
		StartControllerManager: true,
		ControllerManagerArgs: []string{
			// Deployments, ReplicaSets, ServiceAccounts and their
			// kube-root-ca.crt, EndpointSlices, quotas, disruption budgets.
			"--controllers=*",
			"--service-account-private-key-file=" + filepath.Join(pki, "sa.key"),
			"--root-ca-file=" + filepath.Join(pki, "server-ca.crt"),
		},
		Logf: func(format string, args ...any) { logf(format, args...) },
	})
	if err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	if err := c.routeServiceIP(ctx); err != nil {
		return err
	}
	if err := c.startContainerd(ctx); err != nil {
		return err
	}
	if err := c.startScheduler(); err != nil {
		return err
	}
	if err := c.startKubelet(ctx); err != nil {
		return err
	}
	return c.installChart(ctx)
}

// routeServiceIP sends the "kubernetes" Service's ClusterIP:443 to
// kube-apiserver on 127.0.0.1, which the pods reach once route_localnet
// lets the bridge deliver to a loopback address (as kube-proxy does for
// localhost NodePorts).
func (c *cluster) routeServiceIP(ctx context.Context) error {
	u, err := url.Parse(c.cp.APIServerURL())
	if err != nil {
		return err
	}
	const sysctl = "/proc/sys/net/ipv4/conf/all/route_localnet"
	old, err := os.ReadFile(sysctl)
	if err != nil {
		return err
	}
	if err := os.WriteFile(sysctl, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("setting route_localnet: %w", err)
	}
	c.localnet = strings.TrimSpace(string(old))
	rule := []string{"PREROUTING", "-s", podSubnet, "-d", kubernetesServiceIP, "-p", "tcp", "--dport", "443",
		"-j", "DNAT", "--to-destination", "127.0.0.1:" + u.Port(), "-m", "comment", "--comment", "implicit-e2e"}
	if _, err := command(ctx, "iptables", append([]string{"-t", "nat", "-A"}, rule...)...); err != nil {
		return err
	}
	c.dnatRule = rule
	logf("pods reach kube-apiserver at %s:443 (DNAT to 127.0.0.1:%s)", kubernetesServiceIP, u.Port())
	return nil
}

func (c *cluster) startContainerd(ctx context.Context) error {
	o := c.o
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return err
	}
	c.socket = filepath.Join(stateDir, "containerd.sock")
	cniConf := filepath.Join(o.workDir, "cni")
	if err := os.MkdirAll(cniConf, 0o755); err != nil {
		return err
	}
	conflist := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "implicit-e2e",
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}],
              "dataDir": %q}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, bridgeName, podSubnet, filepath.Join(o.workDir, "cni-ipam"))
	if err := os.WriteFile(filepath.Join(cniConf, "10-implicit-e2e.conflist"), []byte(conflist), 0o644); err != nil {
		return err
	}
	// runc, not crun: crun refuses this machine's hybrid cgroup layout.
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # Even root may not lower oom_score_adj in this sandbox ("failed to
  # update /proc/self/oom_score_adj: Permission denied" from runc for the
  # kubelet's -998): clamp it to containerd's own, as rootless setups do.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, filepath.Join(o.workDir, "containerd"), filepath.Join(stateDir, "state"), c.socket, o.pauseRef, o.runc, cniConf)
	configPath := filepath.Join(o.workDir, "containerd.toml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		return err
	}
	var err error
	if c.containerd, err = startProc(o.workDir, "containerd", "containerd", "--config", configPath); err != nil {
		return err
	}
	if err := poll(ctx, 30*time.Second, "containerd", func(ctx context.Context) (bool, string, error) {
		if err := c.containerd.exited(); err != nil {
			return false, "", err
		}
		out, err := c.ctr(ctx, "version")
		return err == nil, out, nil
	}); err != nil {
		return err
	}
	for _, tar := range []string{o.pauseImage, o.image} {
		out, err := c.ctr(ctx, "images", "import", tar)
		if err != nil {
			return err
		}
		logf("imported %s into containerd (namespace k8s.io): %s", filepath.Base(tar), strings.TrimSpace(out))
	}
	return nil
}

func (c *cluster) ctr(ctx context.Context, args ...string) (string, error) {
	return command(ctx, "ctr", append([]string{"--address", c.socket, "--namespace", "k8s.io"}, args...)...)
}

func (c *cluster) startScheduler() error {
	port, err := controlplane.FreePort()
	if err != nil {
		return err
	}
	kc := c.cp.KubeconfigPath()
	c.scheduler, err = startProc(c.o.workDir, "kube-scheduler", filepath.Join(c.o.binDir, "kube-scheduler"),
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port), "--leader-elect=false")
	return err
}

func (c *cluster) startKubelet(ctx context.Context) error {
	o := c.o
	// The node's own identity, as the Node authorizer and NodeRestriction
	// expect: CN=system:node:<name>, O=system:nodes.
	kubeconfig, err := c.cp.WriteUserKubeconfig("system:node:"+o.nodeName, "system:nodes")
	if err != nil {
		return err
	}
	port, err := controlplane.FreePort()
	if err != nil {
		return err
	}
	healthz, err := controlplane.FreePort()
	if err != nil {
		return err
	}
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
healthzBindAddress: 127.0.0.1
healthzPort: %d
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %q}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
# This machine has cgroup v1 (hybrid) and swap is irrelevant here.
failCgroupV1: false
failSwapOn: false
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# In the work directory rather than /var/log/pods (the kubelet still links
# /var/log/containers/*.log there while a container exists).
podLogsDir: %q
`, port, healthz, filepath.Join(o.workDir, "controlplane", "pki", "client-ca.crt"), c.socket, filepath.Join(o.workDir, "pod-logs"))
	configPath := filepath.Join(o.workDir, "kubelet.yaml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		return err
	}
	c.kubelet, err = startProc(o.workDir, "kubelet", filepath.Join(o.binDir, "kubelet"),
		"--config="+configPath, "--kubeconfig="+kubeconfig, "--root-dir="+filepath.Join(o.workDir, "kubelet"),
		"--hostname-override="+o.nodeName, "--v=2")
	if err != nil {
		return err
	}
	return poll(ctx, 3*time.Minute, "node "+o.nodeName+" Ready", func(ctx context.Context) (bool, string, error) {
		if err := c.kubelet.exited(); err != nil {
			return false, "", err
		}
		out, _, err := c.cp.Kubectl(ctx, "get", "node", o.nodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)
		if err != nil {
			return false, err.Error(), nil
		}
		status, _, _ := c.cp.Kubectl(ctx, "get", "node", o.nodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		if status == "True" {
			logf("node %s Ready: %s", o.nodeName, out)
			return true, "", nil
		}
		return false, out, nil
	})
}

// installChart is `helm install` of the chart with the locally imported
// image, trusting kube-apiserver's webhook client CA, and waits for the
// release to be ready.
func (c *cluster) installChart(ctx context.Context) error {
	o := c.o
	args := []string{"install", releaseName, o.chart, "--kubeconfig=" + c.cp.KubeconfigPath(),
		"--namespace", releaseNamespace, "--create-namespace",
		// ctr import names the archive's implicit-apiserver:<tag>
		// docker.io/library/implicit-apiserver:<tag>.
		"--set", "image.repository=implicit-apiserver", "--set", "image.tag=" + o.imageTag,
		"--set-file", "webhooks.clientCA.pem=" + filepath.Join(o.workDir, "controlplane", "webhook-client", "ca.crt"),
		"--wait", "--timeout", "5m"}
	logf("helm %s", strings.Join(args, " "))
	c.helmDone = true
	out, err := command(ctx, c.helm(), args...)
	fmt.Print(out)
	if err != nil {
		pods, _, _ := c.cp.Kubectl(context.WithoutCancel(ctx), "get", "pods", "-A", "-o", "wide")
		events, _, _ := c.cp.Kubectl(context.WithoutCancel(ctx), "get", "events", "-n", releaseNamespace, "--sort-by=.lastTimestamp")
		return fmt.Errorf("%w\npods:\n%s\nevents:\n%s\nkubelet log:\n%s", err, pods, events, tail(c.kubelet.logPath, 30))
	}
	return nil
}

// teardown stops what up started, in reverse order, and removes the
// routing rule and the pods' network; it returns every failure.
func (c *cluster) teardown() error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var errs []error
	if c.helmDone && c.kubelet != nil && c.kubelet.exited() == nil {
		// Helm's uninstall order removes the APIService and the webhook
		// configurations first; the kubelet then stops the pods and
		// releases their network.
		if _, err := command(ctx, c.helm(), "uninstall", releaseName, "--kubeconfig="+c.cp.KubeconfigPath(),
			"--namespace", releaseNamespace, "--wait", "--timeout", "90s"); err != nil {
			errs = append(errs, err)
		}
		_ = poll(ctx, 90*time.Second, "pods gone", func(ctx context.Context) (bool, string, error) {
			out, _, err := c.cp.Kubectl(ctx, "get", "pods", "-n", releaseNamespace, "-o", "name")
			return err == nil && strings.TrimSpace(out) == "", out, nil
		})
	}
	c.kubelet.stop()
	c.scheduler.stop()
	if c.containerd != nil {
		errs = append(errs, c.removeContainers(ctx))
		c.containerd.stop()
		errs = append(errs, c.killShims())
	}
	errs = append(errs, unmountUnder(c.o.workDir))
	if c.cp != nil {
		errs = append(errs, c.cp.Stop())
	}
	if c.dnatRule != nil {
		if _, err := command(ctx, "iptables", append([]string{"-t", "nat", "-D"}, c.dnatRule...)...); err != nil {
			errs = append(errs, err)
		}
	}
	if c.localnet != "" {
		errs = append(errs, os.WriteFile("/proc/sys/net/ipv4/conf/all/route_localnet", []byte(c.localnet), 0o644))
	}
	if _, err := os.Stat("/sys/class/net/" + bridgeName); err == nil {
		if _, err := command(ctx, "ip", "link", "delete", bridgeName); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeContainers kills and deletes every task and container left in
// containerd's k8s.io namespace (sandboxes the kubelet did not remove).
func (c *cluster) removeContainers(ctx context.Context) error {
	out, err := c.ctr(ctx, "containers", "list", "--quiet")
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range strings.Fields(out) {
		_, _ = c.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
		_, _ = c.ctr(ctx, "tasks", "delete", "--force", id)
		if _, err := c.ctr(ctx, "containers", "delete", id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killShims ends the runc shims of this containerd (they outlive it by
// design), found by the socket address in their command line.
func (c *cluster) killShims() error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if strings.HasSuffix(args[0], "containerd-shim-runc-v2") && strings.Contains(string(cmdline), c.socket) {
			logf("killing containerd shim %d", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return nil
}

// unmountUnder detaches every mount at or below dir, deepest first: the
// kubelet bind-mounts its root directory and the pods' volumes there.
func unmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		// Octal escapes (\040 for a space) are left alone: dir has none.
		if p := fields[4]; p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	var errs []error
	for i := len(points) - 1; i >= 0; i-- {
		if err := syscall.Unmount(points[i], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", points[i], err))
		}
	}
	return errors.Join(errs...)
}
