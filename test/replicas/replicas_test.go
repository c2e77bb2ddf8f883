package replicas

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/internal/netnshost"
)

const (
	globalNS = "implicit-global"
	// globalBinding is the global RoleBinding the writer edits.
	globalBinding = "org-viewers"
	// replicaPort is each replica's secure port, in its own namespace.
	replicaPort = 8443
	// tenants is how many namespaces informer-style clients watch, one
	// client each; the first kubectlWatchers of them also get a kubectl loop.
	tenants         = 4
	kubectlWatchers = 2
	// minWatch is the shortest watch: clients ask for timeoutSeconds in
	// [minWatch, 2*minWatch), and kubectl runs as long, so watches renew
	// every few seconds rather than every 30-60 s (kube-apiserver's
	// --min-request-timeout=30).
	minWatch = 5 * time.Second
	// writeEvery is the writer's period.
	writeEvery = time.Second
	// catchUpTimeout bounds the wait, after the last write, for every
	// client to hold it.
	catchUpTimeout = 30 * time.Second
)

// TestTwoReplicas runs two implicit-apiservers behind one APIService with
// aggregator routing, so that kube-apiserver picks a replica per request,
// while informer-style clients and `kubectl get -w` renew their watches
// every few seconds and a writer edits a global RoleBinding every second.
// It reports relists and failed kubectl runs per 100 watch renewals, and
// asserts that both are none (any replica serves any replica's version),
// that both replicas served, and that every client ends up holding the
// last write.
func TestTwoReplicas(t *testing.T) {
	rc := setUp(t, len(hosts))
	ctx, cp, kube, dyn := rc.ctx, rc.cp, rc.kube, rc.dyn
	var err error
	t.Logf("clients watch for %s (%s), writer edits %s/%s every %s", runDuration, durationEnv, globalNS, globalBinding, writeEvery)
	clientCtx, stopClients := context.WithCancel(ctx)
	runCtx, endRun := context.WithTimeout(clientCtx, runDuration)
	defer endRun()
	var wg sync.WaitGroup
	defer func() { stopClients(); wg.Wait() }()
	informers := make([]*informer, tenants)
	for i := range informers {
		informers[i] = newInformer(dyn.Resource(viewGVR).Namespace(tenant(i)), minWatch)
		wg.Add(1)
		go func() { defer wg.Done(); informers[i].run(clientCtx) }()
	}
	kubectls := make([]*kubectlWatcher, kubectlWatchers)
	for i := range kubectls {
		kubectls[i] = &kubectlWatcher{kubectl: "kubectl", kubeconfig: cp.KubeconfigPath(), namespace: tenant(i), minRun: minWatch}
		wg.Add(1)
		go func() { defer wg.Done(); kubectls[i].run(runCtx) }()
	}
	lastWrite, writes, writeErr := write(ctx, runCtx, kube)
	if writeErr != nil {
		t.Fatalf("writer: %v", writeErr)
	}
	inf, kc := informerTotals(informers), kubectlTotals(kubectls)
	t.Logf("writer: %d edits, last source resourceVersion %s", writes, lastWrite)

	// Every client catches up with the last write, through whatever
	// relists it took.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, catchUpTimeout, true, func(context.Context) (bool, error) {
		for i, in := range informers {
			if in.sourceRV(tenant(i)+"/"+globalBinding) != lastWrite {
				return false, nil
			}
		}
		return true, nil
	})
	for i, in := range informers {
		if got := in.sourceRV(tenant(i) + "/" + globalBinding); got != lastWrite {
			t.Errorf("client of %s holds %s from source resourceVersion %q %s after the last write; want %q", tenant(i), globalBinding, got, catchUpTimeout, lastWrite)
		}
	}
	if err == nil {
		t.Logf("every client holds the last write")
	}

	// A relist is a LIST after an informer's first: after a 410, a 504 or
	// any other failed watch.
	relists := inf.lists - len(informers)
	t.Logf("informer-style clients: %d renewals, %d relists (%d after a 410), %d lists, %d other errors",
		inf.renewals, relists, inf.relists, inf.lists, len(inf.other))
	t.Logf("kubectl get -w: %d runs, %d failed", kc.runs, len(kc.failed))
	for i, f := range kc.failed {
		if i == 5 {
			t.Logf("  ... and %d more", len(kc.failed)-i)
			break
		}
		t.Logf("  failed run: %s", f)
	}
	t.Logf("FIGURES duration=%s relists_per_100_renewals=%.1f failed_kubectl_runs_per_100_runs=%.1f (renewals=%d relists=%d kubectl_runs=%d kubectl_failed=%d)",
		runDuration, per100(relists, inf.renewals), per100(len(kc.failed), kc.runs), inf.renewals, relists, kc.runs, len(kc.failed))

	if inf.renewals == 0 || kc.runs == 0 {
		t.Errorf("measured nothing: %d watch renewals, %d kubectl runs", inf.renewals, kc.runs)
	}
	// Any replica serves any replica's version (issue 31): no renewal
	// relists, no kubectl run fails.
	if relists != 0 {
		t.Errorf("informer-style clients relisted %d times in %d renewals; want none", relists, inf.renewals)
	}
	for _, e := range inf.other {
		t.Errorf("informer-style client: %s", e)
	}
	for _, f := range kc.failed {
		t.Errorf("kubectl get -w failed: %s", f)
	}
	// Versions name the replica that issued them: both served.
	if len(inf.instances) != len(hosts) {
		t.Errorf("clients received versions of %d server instances; want one per replica (%d): %v", len(inf.instances), len(hosts), inf.instances)
	}
}

// replicaCluster is a control plane with replicas behind aggregator
// routing, seeded with the global binding they serve.
type replicaCluster struct {
	ctx     context.Context
	cp      *controlplane.ControlPlane
	servers []*controlplane.AggregatedServer
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	admin   *rest.Config
}

// setUp starts the control plane and the first n replicas of hosts (with
// extra flags), registers them behind the APIService and seeds the
// namespaces and the global binding.
func setUp(t *testing.T, n int, extra ...string) *replicaCluster {
	replicas := hosts[:n]
	netnshost.SetUp(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	work, err := os.MkdirTemp("", "implicit-replicas-")
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
	for i, h := range hosts {
		hostIPs[i] = h.HostIP
	}
	replicaIPs := make([]net.IP, len(replicas))
	for i, h := range replicas {
		replicaIPs[i] = h.NSIP
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{
		BinDir:  binDir,
		WorkDir: work,
		// Every address, so the replicas reach it at their veth's far end;
		// the serving certificate names those addresses.
		ServingIPs: hostIPs,
		KubeAPIServerArgs: []string{
			"--bind-address=0.0.0.0",
			"--enable-aggregator-routing=true",
			"--min-request-timeout=30",
		},
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(cp.LogTails(40))
		}
		cp.Stop()
	})
	servers := startReplicas(ctx, t, cp, replicas, extra...)
	if err := cp.RegisterAPIServiceEndpoints(ctx, replicaPort, replicaIPs...); err != nil {
		t.Fatalf("registering the APIService: %v", err)
	}

	admin := cp.AdminConfig()
	logAvailability(ctx, t, admin)
	kube := kubernetes.NewForConfigOrDie(admin)
	dyn := dynamic.NewForConfigOrDie(admin)
	seed(ctx, t, kube)
	for i, h := range replicas {
		waitForBinding(ctx, t, replicaClient(t, admin, h.NSIP), "team-1")
		t.Logf("replica %d serves %s in team-1's view", i+1, globalBinding)
	}
	return &replicaCluster{ctx: ctx, cp: cp, servers: servers, kube: kube, dyn: dyn, admin: admin}
}

// startReplicas starts one implicit-apiserver in each of hs's network
// namespaces, with extra flags, and waits until all are ready. Replica N
// runs on hosts[N-1].
func startReplicas(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, hs []netnshost.Host, extra ...string) []*controlplane.AggregatedServer {
	t.Helper()
	apiServer, err := url.Parse(cp.APIServerURL())
	if err != nil {
		t.Fatal(err)
	}
	servers := make([]*controlplane.AggregatedServer, len(hs))
	for i, h := range hs {
		n := slices.IndexFunc(hosts, func(o netnshost.Host) bool { return o.NetNS == h.NetNS }) + 1
		kubeconfig := filepath.Join(cp.WorkDir(), fmt.Sprintf("replica-%d.kubeconfig", n))
		server := "https://" + net.JoinHostPort(h.HostIP.String(), apiServer.Port())
		if err := netnshost.RewriteServer(cp.KubeconfigPath(), kubeconfig, server); err != nil {
			t.Fatal(err)
		}
		wrapper, err := h.Wrapper(cp.WorkDir(), binary)
		if err != nil {
			t.Fatal(err)
		}
		// Views only: no guards webhook to keep current, and kube-apiserver
		// asks no authorization webhook here.
		servers[i], err = cp.StartAggregated(ctx, controlplane.AggregatedServerOptions{
			Binary: wrapper, Name: fmt.Sprintf("implicit-apiserver-%d", n), Port: replicaPort, ReadyPath: "-",
			Args: append([]string{
				"-v=1",
				"--bind-address=" + h.NSIP.String(),
				"--kubeconfig=" + kubeconfig,
				"--authentication-kubeconfig=" + kubeconfig,
				"--authorization-kubeconfig=" + kubeconfig,
				"--webhook-configuration=",
			}, extra...),
		})
		if err != nil {
			t.Fatalf("starting replica %d: %v", n, err)
		}
	}
	client := &http.Client{Transport: insecureTransport(), Timeout: 5 * time.Second}
	for i, h := range hs {
		u := "https://" + net.JoinHostPort(h.NSIP.String(), strconv.Itoa(replicaPort)) + "/readyz"
		if err := netnshost.WaitReady(ctx, client, u, controlplane.DefaultAPIServiceTimeout); err != nil {
			t.Fatalf("replica at %s: %v\n%s", h.NSIP, err, servers[i].LogTail(40))
		}
		t.Logf("replica ready at %s (log %s)", u, servers[i].LogPath())
	}
	return servers
}

// replicaClient talks to one replica directly, as admin (the replica
// trusts kube-apiserver's client CA and asks it to authorize).
func replicaClient(t *testing.T, admin *rest.Config, addr net.IP) dynamic.Interface {
	t.Helper()
	cfg := rest.CopyConfig(admin)
	cfg.Host = "https://" + net.JoinHostPort(addr.String(), strconv.Itoa(replicaPort))
	// The replica's certificate is self-signed at start-up.
	cfg.CAData = nil
	cfg.Insecure = true
	return dynamic.NewForConfigOrDie(cfg)
}

// seed creates the global namespace, the tenants and the global binding.
func seed(ctx context.Context, t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	names := []string{globalNS}
	for i := range tenants {
		names = append(names, tenant(i))
	}
	for _, name := range names {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: globalNS, Name: globalBinding},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "org:viewers"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
	}
	if _, err := kube.RbacV1().RoleBindings(globalNS).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitForBinding waits until the replica serves the global binding in ns.
func waitForBinding(ctx context.Context, t *testing.T, replica dynamic.Interface, ns string) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, controlplane.DefaultAPIServiceTimeout, true, func(ctx context.Context) (bool, error) {
		_, last = replica.Resource(viewGVR).Namespace(ns).Get(ctx, globalBinding, metav1.GetOptions{})
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("replica does not serve %s/%s: %v (last: %v)", ns, globalBinding, err, last)
	}
}

// write edits the global binding every writeEvery until run ends, and
// returns the source resourceVersion of its last edit and the number of
// edits. Each edit is a request under ctx, so that the last one is not cut
// off half-way, its outcome unknown.
func write(ctx, run context.Context, kube kubernetes.Interface) (last string, n int, err error) {
	tick := time.NewTicker(writeEvery)
	defer tick.Stop()
	for {
		select {
		case <-run.Done():
			return last, n, nil
		case <-tick.C:
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.implicit.dev/edit":"%d"}}}`, n+1)
		rb, err := kube.RbacV1().RoleBindings(globalNS).Patch(ctx, globalBinding, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err != nil {
			return last, n, err
		}
		last, n = rb.ResourceVersion, n+1
	}
}

// insecureTransport skips verification of the replicas' self-signed
// serving certificates; it is used for /readyz only.
func insecureTransport() *http.Transport {
	return &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}
}

func tenant(i int) string { return fmt.Sprintf("team-%d", i+1) }

func informerTotals(ins []*informer) informerStats {
	total := informerStats{instances: map[uint64]bool{}}
	for _, in := range ins {
		s := in.snapshot()
		total.lists += s.lists
		total.renewals += s.renewals
		total.relists += s.relists
		total.retries += s.retries
		total.retryErrors = append(total.retryErrors, s.retryErrors...)
		total.other = append(total.other, s.other...)
		for k := range s.instances {
			total.instances[k] = true
		}
	}
	return total
}

func kubectlTotals(ks []*kubectlWatcher) kubectlStats {
	var total kubectlStats
	for _, k := range ks {
		s := k.snapshot()
		total.runs += s.runs
		total.failed = append(total.failed, s.failed...)
	}
	return total
}
