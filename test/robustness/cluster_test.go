package robustness

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/internal/netnshost"
)

// viewGVR is the view every client reads.
var viewGVR = schema.GroupVersionResource{Group: "implicit.dev", Version: "v1alpha1", Resource: "rolebindings"}

// replicaPort is each replica's secure port, in its own network namespace.
const replicaPort = 8443

// cluster is the control plane and the two replicas behind aggregator
// routing.
type cluster struct {
	cp      *controlplane.ControlPlane
	servers []*controlplane.AggregatedServer
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	admin   *rest.Config
	// direct reads each replica without the aggregator.
	direct []dynamic.Interface
}

// setUp starts etcd, kube-apiserver (compacting every compaction, routing
// to the replicas' endpoints), kube-controller-manager and one replica in
// each host, and registers the replicas behind the APIService.
func setUp(ctx context.Context, t *testing.T) *cluster {
	netnshost.SetUp(t)
	work, err := os.MkdirTemp("", "implicit-robustness-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs kept in %s", filepath.Join(work, "logs"))
			return
		}
		os.RemoveAll(work)
	})
	hostIPs := make([]net.IP, len(hosts))
	replicaIPs := make([]net.IP, len(hosts))
	for i, h := range hosts {
		hostIPs[i], replicaIPs[i] = h.HostIP, h.NSIP
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{
		BinDir:                 binDir,
		WorkDir:                work,
		StartControllerManager: true,
		ServingIPs:             hostIPs,
		KubeAPIServerArgs: []string{
			"--bind-address=0.0.0.0",
			"--enable-aggregator-routing=true",
			"--min-request-timeout=30",
			"--etcd-compaction-interval=" + compaction.String(),
		},
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(cp.LogTails(30))
		}
		cp.Stop()
	})
	apiServer, err := url.Parse(cp.APIServerURL())
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{cp: cp, admin: cp.AdminConfig()}
	for i, h := range hosts {
		kubeconfig := filepath.Join(work, fmt.Sprintf("replica-%d.kubeconfig", i+1))
		if err := netnshost.RewriteServer(cp.KubeconfigPath(), kubeconfig, "https://"+net.JoinHostPort(h.HostIP.String(), apiServer.Port())); err != nil {
			t.Fatal(err)
		}
		wrapper, err := h.Wrapper(work, binary)
		if err != nil {
			t.Fatal(err)
		}
		// Views only: the guards' webhooks are not registered, so every
		// write the writer makes is admitted.
		s, err := cp.StartAggregated(ctx, controlplane.AggregatedServerOptions{
			Binary: wrapper, Name: fmt.Sprintf("implicit-apiserver-%d", i+1), Port: replicaPort, ReadyPath: "-",
			Args: []string{
				"-v=1",
				// The reflectors' "Listing and watching": each of the
				// server's own lists, counted at the end.
				"--vmodule=reflector=3",
				"--bind-address=" + h.NSIP.String(),
				"--kubeconfig=" + kubeconfig,
				"--authentication-kubeconfig=" + kubeconfig,
				"--authorization-kubeconfig=" + kubeconfig,
				"--webhook-configuration=",
				// Well below the compaction interval, as docs/operations.md
				// advises: a quiet source's part stays within about two
				// intervals of etcd's revision.
				"--source-progress-interval=" + sourceProgress().String(),
			},
		})
		if err != nil {
			t.Fatalf("starting replica %d: %v", i+1, err)
		}
		c.servers = append(c.servers, s)
		c.direct = append(c.direct, replicaClient(c.admin, h.NSIP))
	}
	for i := range hosts {
		if err := c.replicaReady(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := cp.RegisterAPIServiceEndpoints(ctx, replicaPort, replicaIPs...); err != nil {
		t.Fatalf("registering the APIService: %v", err)
	}
	c.kube = kubernetes.NewForConfigOrDie(c.admin)
	c.dyn = dynamic.NewForConfigOrDie(c.admin)
	return c
}

// replicaReady waits until replica i answers /readyz.
func (c *cluster) replicaReady(ctx context.Context, i int) error {
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	u := "https://" + net.JoinHostPort(hosts[i].NSIP.String(), strconv.Itoa(replicaPort)) + "/readyz"
	if err := netnshost.WaitReady(ctx, client, u, 2*time.Minute); err != nil {
		return fmt.Errorf("replica %d: %w\n%s", i+1, err, c.servers[i].LogTail(30))
	}
	return nil
}

// setEndpointReady marks replica i's endpoint ready or not, as the
// EndpointSlice controller does for a pod's readiness: the aggregator
// routes only to ready endpoints.
func (c *cluster) setEndpointReady(ctx context.Context, i int, ready bool) error {
	slices := c.kube.DiscoveryV1().EndpointSlices(controlplane.ServiceNamespace)
	return retry.OnError(retry.DefaultBackoff, func(error) bool { return true }, func() error {
		slice, err := slices.Get(ctx, controlplane.ReplicasServiceName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for j := range slice.Endpoints {
			if slice.Endpoints[j].Addresses[0] == hosts[i].NSIP.String() {
				slice.Endpoints[j].Conditions.Ready = &ready
			}
		}
		_, err = slices.Update(ctx, slice, metav1.UpdateOptions{})
		return err
	})
}

// replicaClient reads one replica directly, as admin; its serving
// certificate is self-signed at start-up.
func replicaClient(admin *rest.Config, addr net.IP) dynamic.Interface {
	cfg := rest.CopyConfig(admin)
	cfg.Host = "https://" + net.JoinHostPort(addr.String(), strconv.Itoa(replicaPort))
	cfg.CAData = nil
	cfg.Insecure = true
	return dynamic.NewForConfigOrDie(cfg)
}

// sourceProgress is the replicas' --source-progress-interval: a quarter of
// the compaction interval, and at least the flag's 3 s.
func sourceProgress() time.Duration {
	return max(3*time.Second, compaction/4)
}
