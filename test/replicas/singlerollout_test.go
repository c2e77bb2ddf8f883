package replicas

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	// rolloutShutdownDelay is the replicas' --shutdown-delay-duration, as
	// the chart sets it.
	rolloutShutdownDelay = 5 * time.Second
	// singleRolloutWatchers and singleRolloutInformers are the
	// informer-style clients and client-go informers of
	// TestSingleReplicaRollout, half of every namespace.
	singleRolloutWatchers  = 100
	singleRolloutInformers = 10
)

// TestSingleReplicaRollout rolls out a one-replica install as the chart's
// Deployment does (maxSurge 1, maxUnavailable 0): the new replica starts and
// joins the endpoints; then the old one is deleted, which sends it SIGTERM
// while it leaves the endpoints, both at once as in a cluster. Meanwhile
// informer-style clients that relist on any failed watch (a 503 included)
// and client-go informers watch, under a writer. The old replica serves on
// for --shutdown-delay-duration after SIGTERM, until kube-apiserver routes
// to the new one only, then ends its watches: every client watches again
// from its version on the new replica. No client relists, no request is
// answered 410, and every client ends equal to a fresh list.
func TestSingleReplicaRollout(t *testing.T) {
	delay := "--shutdown-delay-duration=" + rolloutShutdownDelay.String()
	rc := setUp(t, 1, delay)
	ctx, kube, dyn := rc.ctx, rc.kube, rc.dyn

	clientCtx, stopClients := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopClients(); wg.Wait() }()
	informers := make([]*informer, singleRolloutWatchers)
	scopes := make([]string, 0, singleRolloutWatchers+singleRolloutInformers)
	held := make([]func() map[string]string, 0, singleRolloutWatchers+singleRolloutInformers)
	for i := range informers {
		informers[i] = newInformer(dyn.Resource(viewGVR).Namespace(clientScope(i)), rolloutWatch)
		scopes, held = append(scopes, clientScope(i)), append(held, informers[i].held)
		wg.Add(1)
		go func() { defer wg.Done(); informers[i].run(clientCtx) }()
	}
	goInformers := make([]*clientGoInformer, singleRolloutInformers)
	for i := range goInformers {
		goInformers[i] = newClientGoInformer(rc.admin, clientScope(i))
		scopes, held = append(scopes, clientScope(i)), append(held, goInformers[i].held)
		wg.Add(1)
		go func() { defer wg.Done(); goInformers[i].informer.RunWithContext(clientCtx) }()
	}
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		for _, r := range goInformers {
			if !r.informer.HasSynced() {
				return false, nil
			}
		}
		return informerTotals(informers).lists >= len(informers), nil
	}); err != nil {
		t.Fatalf("the clients did not all list: %d of %d informer-style clients", informerTotals(informers).lists, len(informers))
	}
	runCtx, endRun := context.WithCancel(clientCtx)
	endWrites := startWriter(ctx, runCtx, endRun, t, kube)
	time.Sleep(beforeKill) // on purpose: the writer writes before the rollout

	t.Log("the new replica starts and joins the endpoints")
	next := startReplicas(ctx, t, rc.cp, hosts[1:2], delay)[0]
	t.Cleanup(func() { next.Stop() })
	if err := rc.cp.RegisterAPIServiceEndpoints(ctx, replicaPort, hosts[0].NSIP, hosts[1].NSIP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(settle) // on purpose: the aggregator's grace to see the new endpoint, as a readiness delay

	t.Logf("the old replica is deleted: SIGTERM (%s) while it leaves the endpoints", delay)
	stopped := time.Now()
	stopErr := make(chan error, 1)
	go func() { stopErr <- rc.servers[0].Stop() }()
	if err := rc.cp.RegisterAPIServiceEndpoints(ctx, replicaPort, hosts[1].NSIP); err != nil {
		t.Fatal(err)
	}
	if err := <-stopErr; err != nil {
		t.Errorf("the old replica: %v", err)
	}
	exited := time.Now()
	t.Logf("the old replica exited %s after SIGTERM", exited.Sub(stopped).Round(time.Millisecond))
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		for _, in := range informers {
			if !in.openedSince(stopped) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Errorf("not every informer-style client watches again a minute after the old replica exited")
	} else {
		t.Logf("every informer-style client watches again %s after SIGTERM", time.Since(stopped).Round(time.Millisecond))
	}
	time.Sleep(afterReady) // on purpose: the writer writes after the rollout
	endWrites()

	for _, d := range waitSameAsFresh(ctx, rc.admin, scopes, held) {
		t.Error(d)
	}
	var cg clientGoStats
	for _, r := range goInformers {
		cg.add(r.snapshot())
	}
	stopClients()
	wg.Wait()

	inf := informerTotals(informers)
	relists := inf.lists - len(informers)
	goRelists := cg.lists + cg.watchLists - len(goInformers)
	t.Logf("FIGURES single replica rollout: shutdown_delay=%s exit=%s informer_style=%d renewals=%d relists=%d other_errors=%d client_go_informers=%d relists=%d failed_requests=%d answered_410=%d",
		rolloutShutdownDelay, exited.Sub(stopped).Round(100*time.Millisecond), len(informers), inf.renewals, relists, len(inf.other),
		len(goInformers), goRelists, cg.failed, cg.gone)
	if relists != 0 {
		t.Errorf("the informer-style clients relisted %d times; want none", relists)
	}
	for i, e := range inf.other {
		if i == 5 {
			t.Errorf("... and %d more", len(inf.other)-i)
			break
		}
		t.Errorf("informer-style client: %s", e)
	}
	if goRelists != 0 || cg.gone != 0 || cg.expired != 0 {
		t.Errorf("client-go informers: %d relists, %d requests answered 410, %d watches ended with 410; want none", goRelists, cg.gone, cg.expired)
		for _, e := range cg.errors[:min(5, len(cg.errors))] {
			t.Errorf("  a client-go informer's request or watch: %s", e)
		}
	}
}
