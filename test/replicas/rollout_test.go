package replicas

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/internal/netnshost"
)

const (
	// rolloutWatchersEnv overrides how many informer-style clients watch
	// during the rolling restart.
	rolloutWatchersEnv = "IMPLICIT_ROLLOUT_WATCHERS"
	// defaultRolloutWatchers: half of one namespace, half of every one.
	defaultRolloutWatchers = 1000
	// rolloutWatch is the rollout clients' shortest watch: renewals come
	// from the restarts, not from timeouts.
	rolloutWatch = 30 * time.Second
	// rolloutWriteEvery is the rollout writer's period.
	rolloutWriteEvery = 500 * time.Millisecond
	// settle is how long the aggregator is given to see an EndpointSlice
	// change before a replica stops, and the clients after it is back.
	settle = 3 * time.Second
)

// scopesOf is the namespaces of the first n clients of a fleet
// (clientScope).
func scopesOf(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = clientScope(i)
	}
	return out
}

// clientScope is the namespace of the i-th client of a fleet: every
// namespace ("") for even i, one tenant for odd i.
func clientScope(i int) string {
	if i%2 == 0 {
		return ""
	}
	return tenant(i / 2 % tenants)
}

// TestRollingRestart restarts both replicas one at a time, as a rollout of
// the Deployment does (the replica leaves the endpoints, stops, starts
// again with the same binary and configuration, returns to the endpoints),
// while informer-style clients (half of one namespace, half of every
// namespace) and `kubectl get -w` loops watch, and a writer creates, edits
// and deletes global RoleBindings and re-parents a tenant. Every watch the
// stopped replica served resumes on the other or on the restarted one from
// the version it had: no client relists, no kubectl run fails, and every
// client ends with what a fresh list returns.
func TestRollingRestart(t *testing.T) {
	n := defaultRolloutWatchers
	if s := os.Getenv(rolloutWatchersEnv); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 2 {
			t.Fatalf("%s=%q: want a number of at least 2", rolloutWatchersEnv, s)
		}
	}
	// The replicas serve on for the chart's --shutdown-delay-duration after
	// SIGTERM, as in a cluster: the drain below is the pod's preStop grace,
	// and a kube-apiserver slow to see the EndpointSlice change (seconds,
	// on two loaded cores) still routes a renewal or two to the stopping
	// replica, which must answer it rather than drop it.
	rc := setUp(t, len(hosts), "--shutdown-delay-duration="+rolloutShutdownDelay.String())
	ctx, kube, dyn := rc.ctx, rc.kube, rc.dyn
	createTeamLead(ctx, t, kube)

	clientCtx, stopClients := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopClients(); wg.Wait() }()
	informers := make([]*informer, n)
	scopes := make([]dynamic.ResourceInterface, n)
	for i := range informers {
		scopes[i] = dyn.Resource(viewGVR).Namespace(clientScope(i))
		informers[i] = newInformer(scopes[i], rolloutWatch)
		wg.Add(1)
		go func() { defer wg.Done(); informers[i].run(clientCtx) }()
	}
	runCtx, endRun := context.WithCancel(clientCtx)
	kubectls := make([]*kubectlWatcher, kubectlWatchers)
	for i := range kubectls {
		kubectls[i] = &kubectlWatcher{kubectl: "kubectl", kubeconfig: rc.cp.KubeconfigPath(), namespace: tenant(i + 2), minRun: minWatch}
		wg.Add(1)
		go func() { defer wg.Done(); kubectls[i].run(runCtx) }()
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(context.Context) (bool, error) {
		return informerTotals(informers).lists >= n, nil
	}); err != nil {
		t.Fatalf("the %d clients did not all list: %d lists", n, informerTotals(informers).lists)
	}
	t.Logf("%d informer-style clients (%d of every namespace) and %d kubectl loops watch", n, (n+1)/2, len(kubectls))

	endWrites := startWriter(ctx, runCtx, endRun, t, kube)

	all := make([]net.IP, len(hosts))
	for i, h := range hosts {
		all[i] = h.NSIP
	}
	client := &http.Client{Transport: insecureTransport(), Timeout: 5 * time.Second}
	for i, h := range hosts {
		var others []net.IP
		for j, ip := range all {
			if j != i {
				others = append(others, ip)
			}
		}
		t.Logf("%s draining replica %d", time.Now().Format("15:04:05.000"), i+1)
		if err := rc.cp.RegisterAPIServiceEndpoints(ctx, replicaPort, others...); err != nil {
			t.Fatalf("draining replica %d: %v", i+1, err)
		}
		time.Sleep(settle) // on purpose: the drain's grace, as a pod's preStop delay
		start := time.Now()
		if err := rc.servers[i].Restart(ctx); err != nil {
			// A replica that outlives its grace period is killed, as a
			// pod is after terminationGracePeriodSeconds: its clients see
			// the same as after a graceful stop. Start it again.
			t.Logf("restarting replica %d: %v", i+1, err)
			if err := rc.servers[i].Restart(ctx); err != nil {
				t.Fatalf("starting replica %d again: %v", i+1, err)
			}
		}
		u := "https://" + net.JoinHostPort(h.NSIP.String(), strconv.Itoa(replicaPort)) + "/readyz"
		if err := netnshost.WaitReady(ctx, client, u, 2*time.Minute); err != nil {
			t.Fatalf("replica %d after its restart: %v\n%s", i+1, err, rc.servers[i].LogTail(40))
		}
		t.Logf("%s replica %d restarted, ready after %s", time.Now().Format("15:04:05.000"), i+1, time.Since(start).Round(time.Millisecond))
		if err := rc.cp.RegisterAPIServiceEndpoints(ctx, replicaPort, all...); err != nil {
			t.Fatalf("replica %d back in the endpoints: %v", i+1, err)
		}
		time.Sleep(settle) // on purpose: the clients' time back on the restarted replica
	}
	// On purpose: the writer goes on past the clients' longest watch, so
	// that every one renewed at least once after the restarts, on either
	// replica.
	time.Sleep(2 * rolloutWatch)
	endWrites()

	// Every client ends with what a fresh list of its scope returns.
	held := make([]func() map[string]string, len(informers))
	for i, in := range informers {
		held[i] = in.held
	}
	for _, d := range waitSameAsFresh(ctx, rc.admin, scopesOf(n), held) {
		t.Error(d)
	}
	stopClients()
	wg.Wait()
	inf, kc := informerTotals(informers), kubectlTotals(kubectls)
	relists := inf.lists - n
	t.Logf("FIGURES rolling restart: watchers=%d renewals=%d relists=%d kubectl_runs=%d kubectl_failed=%d other_errors=%d",
		n, inf.renewals, relists, kc.runs, len(kc.failed), len(inf.other))
	if relists != 0 {
		t.Errorf("the clients relisted %d times in %d renewals; want none", relists, inf.renewals)
	}
	for i, e := range inf.other {
		if i == 5 {
			t.Errorf("... and %d more", len(inf.other)-i)
			break
		}
		t.Errorf("informer-style client: %s", e)
	}
	for _, f := range kc.failed {
		t.Errorf("kubectl get -w failed: %s", f)
	}
}

// createTeamLead creates team-1's own binding: team-3 inherits it while
// team-1 is its parent (rolloutWriter re-parents team-3).
func createTeamLead(ctx context.Context, t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	lead := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: tenant(0), Name: "team-lead"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "lead"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
	}
	if _, err := kube.RbacV1().RoleBindings(tenant(0)).Create(ctx, lead, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startWriter runs rolloutWriter until run ends. The returned function
// ends the run (endRun), waits for the writer and fails t on its error.
func startWriter(ctx, run context.Context, endRun func(), t *testing.T, kube kubernetes.Interface) func() {
	var writeErr error
	writes := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		writes, writeErr = rolloutWriter(run, ctx, kube)
	}()
	return func() {
		t.Helper()
		endRun()
		<-done
		if writeErr != nil {
			t.Fatalf("writer: %v", writeErr)
		}
		t.Logf("writer: %d writes", writes)
	}
}

// rolloutWriter writes every rolloutWriteEvery until run ends: a new global
// binding, an edit of the seeded one, the deletion of the binding made two
// rounds before, and every fourth round team-3 re-parented (under team-1,
// then without a parent). Each write is a request under ctx.
func rolloutWriter(run, ctx context.Context, kube kubernetes.Interface) (int, error) {
	tick := time.NewTicker(rolloutWriteEvery)
	defer tick.Stop()
	n := 0
	for round := 0; ; round++ {
		select {
		case <-run.Done():
			return n, nil
		case <-tick.C:
		}
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: globalNS, Name: fmt.Sprintf("w-%d", round)},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "writer"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		}
		if _, err := kube.RbacV1().RoleBindings(globalNS).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			return n, err
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.implicit.dev/edit":"%d"}}}`, round)
		if _, err := kube.RbacV1().RoleBindings(globalNS).Patch(ctx, globalBinding, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return n, err
		}
		n += 2
		if round >= 2 {
			if err := kube.RbacV1().RoleBindings(globalNS).Delete(ctx, fmt.Sprintf("w-%d", round-2), metav1.DeleteOptions{}); err != nil {
				return n, err
			}
			n++
		}
		if round%4 == 3 {
			parent := `"` + tenant(0) + `"`
			if round%8 == 7 {
				parent = "null"
			}
			patch := fmt.Sprintf(`{"metadata":{"labels":{"implicit.dev/parent":%s}}}`, parent)
			if _, err := kube.CoreV1().Namespaces().Patch(ctx, tenant(2), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				return n, err
			}
			n++
		}
	}
}
