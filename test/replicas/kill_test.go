package replicas

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	"github.com/implicit-dev/implicit-apiserver/internal/netnshost"
)

const (
	// killWatchers is how many informer-style clients watch the single
	// replica: half of one namespace, half of every namespace.
	killWatchers = 200
	// killInformers is how many client-go informers (dynamic shared
	// informers: client-go's reflector) watch beside them, split the same
	// way.
	killInformers = 20
	// killRetryFor bounds how long an informer-style client retries its
	// watch from its version while no replica is up.
	killRetryFor = 90 * time.Second
	// beforeKill and afterReady are how long the writer writes before the
	// kill and after the restarted replica is ready.
	beforeKill = 5 * time.Second
	afterReady = 10 * time.Second
	// downFor is how long the killed replica stays down before it starts
	// again, as a crashed container waits for the kubelet: long enough for
	// every client to find no replica.
	downFor = 5 * time.Second
)

// TestSingleReplicaKill runs ONE replica behind the APIService, kills it
// (SIGKILL: no graceful shutdown, as a node failure or the OOM killer) and
// starts it again with the same binary and configuration, while
// informer-style clients, client-go informers and `kubectl get -w` loops
// watch and a writer creates, edits and deletes global RoleBindings and
// re-parents a tenant. While the replica is down, kube-apiserver's
// aggregator answers every request 503.
//
//   - The informer-style clients retry their watch from their version on a
//     503 (see informer): they measure the server. The restarted replica,
//     which issued none of their versions, serves every one: no client
//     relists, and each ends equal to a fresh list.
//   - client-go's reflector relists instead: a stream cut by the kill is
//     reported by client-go itself as a 500 InternalError, which the
//     reflector does not retry (MaxInternalErrorRetryDuration is 0), and it
//     does not retry a watch answered 503 either (only a connection refused
//     and a 429; kubernetes/kubernetes#119646). Each informer relists once,
//     from its last version: the relist is served (no 410), and each ends
//     equal to a fresh list. The test logs the relists and their causes.
//   - kubectl get -w fails while no replica is up: the test logs its runs.
func TestSingleReplicaKill(t *testing.T) {
	rc := setUp(t, 1)
	ctx, kube, dyn, server := rc.ctx, rc.kube, rc.dyn, rc.servers[0]
	createTeamLead(ctx, t, kube)

	clientCtx, stopClients := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopClients(); wg.Wait() }()
	informers := make([]*informer, killWatchers)
	scopes := make([]dynamic.ResourceInterface, killWatchers)
	for i := range informers {
		scopes[i] = dyn.Resource(viewGVR).Namespace(clientScope(i))
		informers[i] = newInformer(scopes[i], rolloutWatch)
		informers[i].retryUnavailable = killRetryFor
		wg.Add(1)
		go func() { defer wg.Done(); informers[i].run(clientCtx) }()
	}
	goInformers := make([]*clientGoInformer, killInformers)
	for i := range goInformers {
		goInformers[i] = newClientGoInformer(rc.admin, clientScope(i))
		wg.Add(1)
		go func() { defer wg.Done(); goInformers[i].informer.RunWithContext(clientCtx) }()
	}
	runCtx, endRun := context.WithCancel(clientCtx)
	kubectls := make([]*kubectlWatcher, kubectlWatchers)
	for i := range kubectls {
		kubectls[i] = &kubectlWatcher{kubectl: "kubectl", kubeconfig: rc.cp.KubeconfigPath(), namespace: tenant(i + 2), minRun: minWatch}
		wg.Add(1)
		go func() { defer wg.Done(); kubectls[i].run(runCtx) }()
	}
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		for _, r := range goInformers {
			if !r.informer.HasSynced() {
				return false, nil
			}
		}
		return informerTotals(informers).lists >= killWatchers, nil
	}); err != nil {
		t.Fatalf("the clients did not all list: %d of %d informer-style clients", informerTotals(informers).lists, killWatchers)
	}
	t.Logf("%d informer-style clients, %d client-go informers (half of every namespace) and %d kubectl loops watch one replica",
		killWatchers, killInformers, len(kubectls))

	endWrites := startWriter(ctx, runCtx, endRun, t, kube)
	time.Sleep(beforeKill) // on purpose: the writer writes before the kill

	killed := time.Now()
	if err := server.Kill(); err != nil {
		t.Fatalf("killing the replica: %v", err)
	}
	// The kubelet sees the container die and the endpoint turns not ready;
	// it is ready again when the restarted replica's readiness probe passes.
	if err := setEndpointsReady(ctx, kube, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("replica killed (SIGKILL), its endpoint not ready; starting it again in %s with the same binary and flags", downFor)
	time.Sleep(downFor) // on purpose: the replica stays down, as a crashed container
	if err := server.Restart(ctx); err != nil {
		t.Fatalf("starting the replica again: %v", err)
	}
	client := &http.Client{Transport: insecureTransport(), Timeout: 5 * time.Second}
	u := "https://" + net.JoinHostPort(hosts[0].NSIP.String(), strconv.Itoa(replicaPort)) + "/readyz"
	if err := netnshost.WaitReady(ctx, client, u, 2*time.Minute); err != nil {
		t.Fatalf("the replica after its restart: %v\n%s", err, server.LogTail(40))
	}
	if err := setEndpointsReady(ctx, kube, true); err != nil {
		t.Fatal(err)
	}
	ready := time.Now()
	t.Logf("replica ready, its endpoint too, %s after the kill", ready.Sub(killed).Round(time.Millisecond))
	// Every informer-style client watches again: the outage is over for
	// them.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, killRetryFor, true, func(context.Context) (bool, error) {
		for _, in := range informers {
			if !in.openedSince(ready) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Errorf("not every informer-style client watches again %s after the replica was ready", killRetryFor)
	} else {
		t.Logf("every informer-style client watches again %s after the kill", time.Since(killed).Round(time.Millisecond))
	}
	time.Sleep(afterReady) // on purpose: the writer writes after the replica is back
	endWrites()

	// Every client ends with what a fresh list of its scope returns.
	held := make([]func() map[string]string, 0, len(informers)+len(goInformers))
	clientScopes := make([]string, 0, len(informers)+len(goInformers))
	for i, in := range informers {
		held, clientScopes = append(held, in.held), append(clientScopes, clientScope(i))
	}
	for i, r := range goInformers {
		held, clientScopes = append(held, r.held), append(clientScopes, clientScope(i))
	}
	for _, d := range waitSameAsFresh(ctx, rc.admin, clientScopes, held) {
		t.Error(d)
	}
	// Counted before the clients stop: stopping ends their watches too.
	var cg clientGoStats
	for _, r := range goInformers {
		cg.add(r.snapshot())
	}
	stopClients()
	wg.Wait()

	inf, kc := informerTotals(informers), kubectlTotals(kubectls)
	relists := inf.lists - killWatchers
	t.Logf("FIGURES single replica kill: down=%s informer_style=%d renewals=%d retries=%d relists=%d other_errors=%d",
		ready.Sub(killed).Round(100*time.Millisecond), killWatchers, inf.renewals, inf.retries, relists, len(inf.other))
	for _, e := range inf.retryErrors[:min(3, len(inf.retryErrors))] {
		t.Logf("  a retried watch: %s", e)
	}
	if relists != 0 {
		t.Errorf("the informer-style clients relisted %d times; want none (the restarted replica serves their versions)", relists)
	}
	if inf.retries == 0 {
		t.Errorf("no informer-style client retried a watch: the kill went unnoticed, the test measured nothing")
	}
	for i, e := range inf.other {
		if i == 5 {
			t.Errorf("... and %d more", len(inf.other)-i)
			break
		}
		t.Errorf("informer-style client: %s", e)
	}

	t.Logf("FIGURES single replica kill: client_go_informers=%d relists=%d (lists=%d watch_lists=%d, from a version %d) watches=%d failed_requests=%d answered_410=%d",
		killInformers, cg.lists+cg.watchLists-killInformers, cg.lists, cg.watchLists, cg.fromVersion, cg.watches, cg.failed, cg.gone)
	causes := map[string]int{}
	for _, e := range cg.errors {
		causes[e]++
	}
	for e, n := range causes {
		t.Logf("  %d× a client-go informer's request or watch: %s", n, e)
	}
	if cg.gone != 0 || cg.expired != 0 {
		t.Errorf("client-go informers: %d requests answered 410, %d watches ended with 410 Expired; want none (their relist, from their last version, is served)", cg.gone, cg.expired)
	}
	t.Logf("FIGURES single replica kill: kubectl_runs=%d kubectl_failed=%d", kc.runs, len(kc.failed))
	for i, f := range kc.failed {
		if i == 3 {
			t.Logf("  ... and %d more", len(kc.failed)-i)
			break
		}
		t.Logf("  failed kubectl run (no replica up): %s", f)
	}
}

// setEndpointsReady marks every endpoint of the replicas' EndpointSlice
// ready or not, as the EndpointSlice controller does when the kubelet
// reports a pod's readiness: kube-apiserver's aggregator routes only to
// ready endpoints.
func setEndpointsReady(ctx context.Context, kube kubernetes.Interface, ready bool) error {
	slices := kube.DiscoveryV1().EndpointSlices(controlplane.ServiceNamespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		slice, err := slices.Get(ctx, controlplane.ReplicasServiceName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range slice.Endpoints {
			slice.Endpoints[i].Conditions.Ready = &ready
		}
		_, err = slices.Update(ctx, slice, metav1.UpdateOptions{})
		return err
	})
}

// waitSameAsFresh waits, up to catchUpTimeout, until every client holds
// what a fresh list of its scope returns (held[i] is client i's, of the
// namespace scopes[i], "" for every namespace), and returns how the clients
// that never did differ. Each round lists every distinct scope once, with
// a client of its own (admin's configuration): the fleet's shared client
// and its rate limiter are busy with the clients' own requests. A round
// whose list fails keeps the differences of the last round that compared.
func waitSameAsFresh(ctx context.Context, admin *rest.Config, scopes []string, held []func() map[string]string) []string {
	views := dynamic.NewForConfigOrDie(admin).Resource(viewGVR)
	var last []string
	var listErr error
	err := wait.PollUntilContextTimeout(ctx, time.Second, catchUpTimeout, true, func(ctx context.Context) (bool, error) {
		fresh := map[string]map[string]string{}
		for _, ns := range scopes {
			if _, ok := fresh[ns]; ok {
				continue
			}
			list, err := views.Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				listErr = fmt.Errorf("a fresh list of %q: %w", ns, err)
				return false, nil
			}
			fresh[ns] = sourceVersions(list.Items)
		}
		listErr, last = nil, nil
		for i := range held {
			want := fresh[scopes[i]]
			if got := held[i](); !maps.Equal(got, want) {
				var diff []string
				for k, v := range got {
					if want[k] != v {
						diff = append(diff, fmt.Sprintf("holds %s@%s (list: %q)", k, v, want[k]))
					}
				}
				for k, v := range want {
					if _, ok := got[k]; !ok {
						diff = append(diff, fmt.Sprintf("lacks %s@%s", k, v))
					}
				}
				last = append(last, fmt.Sprintf("client %d (scope %q): %v", i, scopes[i], diff))
			}
		}
		return len(last) == 0, nil
	})
	if err == nil {
		return nil
	}
	if len(last) > 5 {
		last = append(last[:5], fmt.Sprintf("... and %d more", len(last)-5))
	}
	if listErr != nil {
		last = append(last, listErr.Error())
	}
	if len(last) == 0 {
		last = []string{fmt.Sprintf("no fresh list answered in %s", catchUpTimeout)}
	}
	return last
}

// sourceVersions maps each item's namespace/name to the resourceVersion of
// the source it was merged from.
func sourceVersions(items []unstructured.Unstructured) map[string]string {
	out := make(map[string]string, len(items))
	for _, item := range items {
		out[item.GetNamespace()+"/"+item.GetName()] = item.GetAnnotations()[sourceRVAnnotation]
	}
	return out
}

// clientGoStats counts the requests of a client-go informer.
type clientGoStats struct {
	// lists are the LISTs answered (continuations not counted), and
	// watchLists the watches with sendInitialEvents=true answered (a list
	// by stream): the first and each relist. failed are requests of any
	// kind not answered 200.
	lists, watchLists int
	// fromVersion are the lists and watch-lists answered that asked for a
	// resourceVersion (not "" or "0"): relists from the informer's last.
	fromVersion int
	watches     int // other watches answered
	failed      int
	gone        int // requests answered 410
	expired     int // watches that ended with 410 Expired
	// errors are why the informer's watches and lists ended or failed.
	errors []string
}

func (s *clientGoStats) add(o clientGoStats) {
	s.lists += o.lists
	s.watchLists += o.watchLists
	s.watches += o.watches
	s.failed += o.failed
	s.fromVersion += o.fromVersion
	s.gone += o.gone
	s.expired += o.expired
	s.errors = append(s.errors, o.errors...)
}

// clientGoInformer is a shared informer of the views, built as
// client-go's dynamicinformer builds one, its reflector unchanged, on a
// connection of its own whose requests it counts. Its watches are passed
// through a filter that notes why they end: the reflector logs that, and
// tells its error handler only of a failed list.
type clientGoInformer struct {
	informer cache.SharedIndexInformer
	mu       sync.Mutex
	stats    clientGoStats
}

func newClientGoInformer(admin *rest.Config, namespace string) *clientGoInformer {
	c := &clientGoInformer{}
	cfg := rest.CopyConfig(admin)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt: rt, c: c} })
	dyn := dynamic.NewForConfigOrDie(cfg)
	client := dyn.Resource(viewGVR).Namespace(namespace)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := client.List(ctx, opts)
			if err != nil {
				c.noteError(err)
			}
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := client.Watch(ctx, opts)
			if err != nil {
				c.noteError(err)
				return nil, err
			}
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				if e.Type == watch.Error {
					c.noteError(apierrors.FromObject(e.Object))
				}
				return e, true
			}), nil
		},
	}, dyn)
	c.informer = cache.NewSharedIndexInformerWithOptions(lw, &unstructured.Unstructured{}, cache.SharedIndexInformerOptions{})
	return c
}

// noteError counts err among the informer's.
func (c *clientGoInformer) noteError(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		c.stats.expired++
	}
	c.stats.errors = append(c.stats.errors, cause(err))
}

// streamID is what differs between two clients' messages of a cut stream.
var streamID = regexp.MustCompile(`stream ID [0-9]+`)

// cause is err's message without what differs between two clients: the
// first line, stream IDs out, cut at the first resourceVersion.
func cause(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	if i := strings.Index(s, "resourceVersion"); i >= 0 {
		s = s[:i] + "…"
	}
	return streamID.ReplaceAllString(s, "stream ID N")
}

func (c *clientGoInformer) held() map[string]string {
	out := map[string]string{}
	for _, obj := range c.informer.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			out[u.GetNamespace()+"/"+u.GetName()] = u.GetAnnotations()[sourceRVAnnotation]
		}
	}
	return out
}

func (c *clientGoInformer) snapshot() clientGoStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.errors = append([]string(nil), s.errors...)
	return s
}

// countingTransport counts a client-go informer's requests by kind, and
// those answered 410.
type countingTransport struct {
	rt http.RoundTripper
	c  *clientGoInformer
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	resp, err := t.rt.RoundTrip(req)
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	switch {
	case err != nil || resp.StatusCode != http.StatusOK:
		t.c.stats.failed++
		if err == nil && resp.StatusCode == http.StatusGone {
			t.c.stats.gone++
		}
	case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
		t.c.stats.watchLists++
		t.c.stats.fromVersion += fromVersion(q.Get("resourceVersion"))
	case q.Get("watch") == "true":
		t.c.stats.watches++
	case q.Get("continue") == "":
		t.c.stats.lists++
		t.c.stats.fromVersion += fromVersion(q.Get("resourceVersion"))
	}
	return resp, err
}

func fromVersion(rv string) int {
	if rv == "" || rv == "0" {
		return 0
	}
	return 1
}
