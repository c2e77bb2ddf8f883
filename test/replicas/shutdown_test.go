package replicas

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

const (
	// shutdownWatches is how many watches the stopped replica holds (the
	// issue's figure is 10,000: test/bench -edges measures that), opened
	// through kube-apiserver, shutdownPerConnection on each connection.
	shutdownWatches       = 1000
	shutdownPerConnection = 200
	// shutdownInformers are client-go informers beside them.
	shutdownInformers = 10
)

// shutdownWatch is one raw watch of TestReplicaShutdownEndsWatches: how its
// stream ended.
type shutdownWatch struct {
	ended time.Time
	clean bool // the stream's end (EOF), not a reset or a cut
	cause string
}

// TestReplicaShutdownEndsWatches stops a replica that holds 1,000 watches
// (SIGTERM, --shutdown-delay-duration as the chart sets it) while it leaves
// the endpoints and a second replica serves, as a rollout does. The
// process exits by itself (it is not killed), every watch it held sees its
// stream end cleanly through kube-apiserver (an EOF, not a reset or an
// error), none before the shutdown delay, and client-go informers that
// watched it watch again from their version on the other replica: no
// LIST, no watch-list, and each follows a write made after the exit.
func TestReplicaShutdownEndsWatches(t *testing.T) {
	delay := "--shutdown-delay-duration=" + rolloutShutdownDelay.String()
	rc := setUp(t, 1, delay)
	ctx, kube := rc.ctx, rc.kube

	// client-go informers, then the raw watches, all on the first replica
	// (the only one yet).
	clientCtx, stopClients := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopClients(); wg.Wait() }()
	goInformers := make([]*clientGoInformer, shutdownInformers)
	scopes := make([]string, len(goInformers))
	held := make([]func() map[string]string, len(goInformers))
	for i := range goInformers {
		goInformers[i] = newClientGoInformer(rc.admin, clientScope(i))
		scopes[i], held[i] = clientScope(i), goInformers[i].held
		wg.Add(1)
		go func() { defer wg.Done(); goInformers[i].informer.RunWithContext(clientCtx) }()
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		for _, r := range goInformers {
			if !r.informer.HasSynced() {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatalf("the client-go informers did not sync")
	}
	watches, ended := openWatches(clientCtx, t, rc.admin, shutdownWatches)

	t.Log("a second replica starts and joins the endpoints")
	next := startReplicas(ctx, t, rc.cp, hosts[1:2], delay)[0]
	t.Cleanup(func() { next.Stop() })
	if err := rc.cp.RegisterAPIServiceEndpoints(ctx, replicaPort, hosts[0].NSIP, hosts[1].NSIP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(settle) // on purpose: the aggregator's grace to see the new endpoint
	var before clientGoStats
	for _, r := range goInformers {
		before.add(r.snapshot())
	}

	t.Logf("the first replica, holding %d watches, gets SIGTERM (%s) while it leaves the endpoints", shutdownWatches, delay)
	stopped := time.Now()
	stopErr := make(chan error, 1)
	go func() { stopErr <- rc.servers[0].Stop() }()
	if err := rc.cp.RegisterAPIServiceEndpoints(ctx, replicaPort, hosts[1].NSIP); err != nil {
		t.Fatal(err)
	}
	if err := <-stopErr; err != nil {
		t.Fatalf("the replica did not exit by itself: %v", err)
	}
	exited := time.Since(stopped)
	select {
	case <-ended:
	case <-time.After(time.Minute):
		t.Fatalf("watches still open a minute after the replica exited")
	}
	var clean, early int
	causes := map[string]int{}
	var last time.Duration
	for _, w := range watches {
		if w.ended.Before(stopped.Add(rolloutShutdownDelay)) {
			early++
		}
		last = max(last, w.ended.Sub(stopped))
		if w.clean {
			clean++
		} else {
			causes[w.cause]++
		}
	}
	t.Logf("FIGURES replica shutdown: watches=%d shutdown_delay=%s exit=%s last_watch_end=%s clean=%d",
		len(watches), rolloutShutdownDelay, exited.Round(100*time.Millisecond), last.Round(100*time.Millisecond), clean)
	if clean != len(watches) {
		t.Errorf("%d of %d watches ended cleanly; the others: %v", clean, len(watches), causes)
	}
	if early != 0 {
		t.Errorf("%d watches ended before the shutdown delay (%s) had passed", early, rolloutShutdownDelay)
	}

	t.Log("a write after the exit reaches every informer through the other replica")
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: globalNS, Name: "after-shutdown"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "org:auditors"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
	}
	if _, err := kube.RbacV1().RoleBindings(globalNS).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for _, h := range held {
			if !holds(h(), rb.Name) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Errorf("not every informer holds the binding written after the exit")
	}
	for _, d := range waitSameAsFresh(ctx, rc.admin, scopes, held) {
		t.Error(d)
	}
	var after clientGoStats
	for _, r := range goInformers {
		after.add(r.snapshot())
	}
	relists := after.lists + after.watchLists - before.lists - before.watchLists
	t.Logf("FIGURES replica shutdown: client_go_informers=%d relists=%d watches_after=%d failed_requests=%d",
		len(goInformers), relists, after.watches-before.watches, after.failed-before.failed)
	if relists != 0 || after.gone != 0 || after.expired != 0 {
		t.Errorf("client-go informers: %d relists, %d requests answered 410, %d watches ended with 410; want none", relists, after.gone, after.expired)
		for _, e := range after.errors[:min(5, len(after.errors))] {
			t.Errorf("  a client-go informer's request or watch: %s", e)
		}
	}
	if after.watches <= before.watches {
		t.Errorf("the client-go informers did not watch again after the replica exited")
	}
}

// openWatches opens n watches of the views (half one namespace, half every
// namespace) through kube-apiserver, from a list's version, perConnection
// on each HTTP/2 connection, and reads them until they end. ended is
// closed once all have.
func openWatches(ctx context.Context, t *testing.T, admin *rest.Config, n int) ([]*shutdownWatch, <-chan struct{}) {
	t.Helper()
	rvs := map[string]string{}
	for _, scope := range []string{clientScope(0), clientScope(1)} {
		l, err := dynamic.NewForConfigOrDie(admin).Resource(viewGVR).Namespace(scope).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rvs[scope] = l.GetResourceVersion()
	}
	out := make([]*shutdownWatch, n)
	var opened, done sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for c := 0; c*shutdownPerConnection < n; c++ {
		cfg := rest.CopyConfig(admin)
		d := &net.Dialer{Timeout: 10 * time.Second}
		cfg.Dial = d.DialContext // a connection of its own
		hc, err := rest.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		host := strings.TrimSuffix(cfg.Host, "/")
		for i := c * shutdownPerConnection; i < min(n, (c+1)*shutdownPerConnection); i++ {
			w := &shutdownWatch{}
			out[i] = w
			scope := clientScope(i)
			path := "/apis/implicit.dev/v1alpha1/rolebindings"
			if scope != "" {
				path = "/apis/implicit.dev/v1alpha1/namespaces/" + scope + "/rolebindings"
			}
			q := url.Values{"watch": {"true"}, "allowWatchBookmarks": {"true"}, "resourceVersion": {rvs[scope]}, "timeoutSeconds": {"1800"}}
			opened.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, host+path+"?"+q.Encode(), nil)
				req.Header.Set("Accept", "application/json")
				resp, err := hc.Do(req)
				if err == nil && resp.StatusCode != http.StatusOK {
					resp.Body.Close()
					err = errors.New(resp.Status)
				}
				opened.Done()
				if err != nil {
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
					w.ended, w.cause = time.Now(), "not opened"
					return
				}
				defer resp.Body.Close()
				dec := json.NewDecoder(resp.Body)
				for {
					var ev json.RawMessage
					if err := dec.Decode(&ev); err != nil {
						w.ended, w.clean = time.Now(), errors.Is(err, io.EOF)
						if !w.clean {
							w.cause = cause(err)
						}
						return
					}
				}
			}()
		}
	}
	opened.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of %d watches did not open: %v", len(failures), n, failures[:min(5, len(failures))])
	}
	t.Logf("%d watches open on the first replica", n)
	ended := make(chan struct{})
	go func() { done.Wait(); close(ended) }()
	return out, ended
}

// holds reports whether an informer's items include one named name.
func holds(items map[string]string, name string) bool {
	for k := range items {
		if strings.HasSuffix(k, "/"+name) {
			return true
		}
	}
	return false
}
