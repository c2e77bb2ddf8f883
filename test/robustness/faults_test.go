package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"
)

// The faults the run injects.
const (
	killReplica          = "kill-replica"
	pauseReplica         = "pause-replica"
	restartKubeAPIServer = "restart-kube-apiserver"
	cutWatches           = "cut-watches"
)

var faultKinds = []string{killReplica, pauseReplica, restartKubeAPIServer, cutWatches}

// faulter injects one fault at a time, at random intervals, drawn from
// its own seeded source; the first of each kind come first, in a random
// order, so that even a short run has every kind.
type faulter struct {
	c       *cluster
	clients []cutter
	rec     *recorder
	logf    func(string, ...any)

	rng    *rand.Rand
	queue  []string
	mu     sync.Mutex
	counts map[string]int
	failed []string
}

func newFaulter(c *cluster, clients []cutter, rec *recorder, seed uint64, logf func(string, ...any)) *faulter {
	rng := rand.New(rand.NewPCG(seed, 2))
	queue := append([]string(nil), faultKinds...)
	rng.Shuffle(len(queue), func(i, j int) { queue[i], queue[j] = queue[j], queue[i] })
	return &faulter{c: c, clients: clients, rec: rec, logf: logf, rng: rng, queue: queue, counts: map[string]int{}}
}

// run injects faults until ctx ends; the fault under way finishes under
// outer, so the servers are all up when it returns.
func (f *faulter) run(ctx, outer context.Context) {
	for {
		sleep(ctx, time.Duration(6+f.rng.IntN(7))*time.Second)
		if ctx.Err() != nil {
			return
		}
		kind := faultKinds[f.rng.IntN(len(faultKinds))]
		if len(f.queue) > 0 {
			kind, f.queue = f.queue[0], f.queue[1:]
		}
		replica := f.rng.IntN(len(f.c.servers))
		f.rec.fault(kind)
		if err := f.inject(outer, kind, replica); err != nil {
			f.mu.Lock()
			f.failed = append(f.failed, fmt.Sprintf("%s: %v", kind, err))
			f.mu.Unlock()
		}
		f.mu.Lock()
		f.counts[kind]++
		f.mu.Unlock()
	}
}

func (f *faulter) inject(ctx context.Context, kind string, replica int) error {
	c := f.c
	start := time.Now()
	defer func() {
		f.logf("fault %s (replica %d) took %s", kind, replica+1, time.Since(start).Round(100*time.Millisecond))
	}()
	switch kind {
	case killReplica:
		// SIGKILL, down 2 s, its endpoint not ready meanwhile, as a
		// crashed container and its kubelet.
		if err := c.servers[replica].Kill(); err != nil {
			return err
		}
		if err := c.setEndpointReady(ctx, replica, false); err != nil {
			return err
		}
		sleep(ctx, 2*time.Second)
		if err := c.servers[replica].Restart(ctx); err != nil {
			return err
		}
		if err := c.replicaReady(ctx, replica); err != nil {
			return err
		}
		return c.setEndpointReady(ctx, replica, true)
	case pauseReplica:
		// SIGSTOP for 3 s: a replica that stops answering (a long GC
		// pause, a throttled container) while its endpoint stays ready.
		p := c.servers[replica].Process()
		if p == nil {
			return fmt.Errorf("replica %d not running", replica+1)
		}
		if err := syscall.Kill(-p.Pid(), syscall.SIGSTOP); err != nil {
			return err
		}
		sleep(ctx, 3*time.Second)
		return syscall.Kill(-p.Pid(), syscall.SIGCONT)
	case restartKubeAPIServer:
		// Its watch cache cold when it is back: a reflector that watches
		// again from a revision before the cache's start gets 410 and
		// relists, the replicas' informers included.
		if err := c.cp.StopKubeAPIServer(); err != nil {
			return err
		}
		sleep(ctx, 2*time.Second)
		if err := c.cp.StartKubeAPIServer(ctx); err != nil {
			return err
		}
		f.rec.kubeAPIServerBack()
		return c.cp.WaitAPIServiceAvailable(ctx)
	case cutWatches:
		for _, cl := range f.clients {
			cl.cut()
		}
		return nil
	}
	return fmt.Errorf("unknown fault %q", kind)
}

func (f *faulter) snapshot() (map[string]int, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	counts := map[string]int{}
	for k, v := range f.counts {
		counts[k] = v
	}
	return counts, append([]string(nil), f.failed...)
}
