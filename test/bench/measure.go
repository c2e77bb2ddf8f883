package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

var roundTimeout = 2 * time.Minute

const (
	// copyQPS is a copy controller's write rate (HNC's default
	// --apiserver-qps-throttle).
	copyQPS = 50
	// copyWorkers bound the unthrottled copy's concurrency.
	copyWorkers = 32
	// maxSlowEdits bounds the edits made to get a never-reading watcher closed.
	maxSlowEdits = 40
)

func labelPatch(value string) []byte {
	return fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, labelBench, value)
}

// measureImplicit measures, for each G, memory, reads and R propagation
// rounds of one global edit to N namespace view watchers and one -A one.
func (b *bench) measureImplicit(ctx context.Context, res *nResult) error {
	for gi, g := range b.o.globals {
		if gi > 0 {
			b.prog.show("adding globals N=%d G=%d", b.n, g)
			if err := b.addGlobals(ctx, g); err != nil {
				return err
			}
		}
		gr := &gResult{G: g}
		res.G = append(res.G, gr)
		fmt.Printf("N=%d G=%d:\n", b.n, g)
		gr.Mem = b.memory(ctx, "without watchers")
		if !b.o.fanoutOnly {
			if err := b.reads(ctx, gr); err != nil {
				return fmt.Errorf("reads: %w", err)
			}
		}
		b.prog.step("reads N=%d G=%d", b.n, g)

		f, err := b.startFleet(ctx, viewFleet(viewRoleBindings, b.tenants, b.o.viewAll), b.tenants)
		if err != nil {
			return err
		}
		gr.Watchers = f.open
		gr.MemWatchers = b.memory(ctx, fmt.Sprintf("with %d view watchers open", f.open))
		if gi == 0 {
			b.implicitSrv.profile(ctx, b.o.outDir, fmt.Sprintf("N%d-G%d-watchers", b.n, g))
		}
		// The native fan-out of the same edit, opened after the memory
		// figures so that they stay the view watchers' alone.
		nf, err := b.startFleet(ctx, sourceFleet(globalName(0), len(b.tenants)), b.tenants)
		if err != nil {
			f.stop()
			return err
		}
		gr.NativeWatchers = nf.open
		b.prog.step("view and native watchers open N=%d G=%d", b.n, g)

		err = b.implicitRounds(ctx, f, nf, gr)
		nf.stop()
		if err == nil && gi == 0 && b.o.promotionRuns > 0 && !b.o.fanoutOnly {
			err = b.promotionRounds(ctx, f, gr)
		}
		if err == nil && gi == 0 && !b.o.fanoutOnly {
			err = b.slowWatcher(ctx, f, res)
		}
		f.stop()
		if err != nil {
			return err
		}
	}
	return nil
}

// implicitRounds edits global-0 -runs times. Each edit is one round,
// timed on both fleets: the view watchers (one per tenant namespace, and
// the -A one) and as many native watchers of the source RoleBinding served
// by kube-apiserver's watch cache. Every edit of the source reaches both
// fleets whichever is timed, so one edit timed on both is the same load as
// alternating rounds, with the noise of each round shared by both figures;
// each round waits until both fleets have the edit, so nothing of one round
// spills into the next.
func (b *bench) implicitRounds(ctx context.Context, f, nf *fleet, gr *gResult) error {
	name := globalName(0)
	before, err := b.implicitSrv.metrics(ctx, "implicit_watch_events_delivered_total")
	if err != nil {
		return err
	}
	if gr.G == b.o.globals[0] {
		// CPU profiles of implicit-apiserver and kube-apiserver over the
		// first rounds: where each server's share of a fan-out goes (the
		// views' events cross kube-apiserver's proxy, the native ones its
		// watch cache).
		tag := fmt.Sprintf("N%d-G%d-rounds", b.n, gr.G)
		defer b.implicitSrv.cpuProfile(ctx, b.o.outDir, tag, 10)()
		defer b.kubeSrv.cpuProfile(ctx, b.o.outDir, tag, 10)()
	}
	cpuI, cpuK := b.implicitSrv.cpu(), b.kubeSrv.cpu()
	reconnects, nativeReconnects := f.reconnects.Load(), nf.reconnects.Load()
	// One unrecorded edit first: right after the fleets open, the first
	// round measured 2-4x the others at N = 10,000 on both fleets.
	for i := -1; i < b.o.runs; i++ {
		value := fmt.Sprintf("implicit-g%d-%d", gr.G, i+1)
		if i < 0 {
			value = fmt.Sprintf("implicit-g%d-warmup", gr.G)
		}
		r := newRound(name, value, len(b.tenants), len(b.tenants), b.o.viewAll)
		nr := newRound(name, value, nf.open, 0, false)
		start, err := measureAll(ctx, roundTimeout, func(ctx context.Context) error {
			_, err := b.kube.RbacV1().RoleBindings(globalNS).Patch(ctx, name, types.MergePatchType, labelPatch(value), metav1.PatchOptions{})
			return err
		}, armed{f, r}, armed{nf, nr})
		if err != nil {
			return err
		}
		last, all, native := since(start, r.lastAt.Load()), since(start, r.allAt.Load()), since(start, nr.lastAt.Load())
		if i < 0 {
			fmt.Printf("  warm-up edit, not counted: last view watcher %s, last native watcher %s\n", dur(last), dur(native))
			time.Sleep(100 * time.Millisecond)
			continue
		}
		gr.Implicit, gr.Native = append(gr.Implicit, last), append(gr.Native, native)
		if b.o.viewAll {
			gr.ImplicitAll = append(gr.ImplicitAll, all)
		}
		b.prog.step("propagation N=%d G=%d run %d: last view watcher %s, -A %s; last native watcher %s (%s)", b.n, gr.G, i+1, dur(last), dur(all), dur(native), ratio(last, native))
		time.Sleep(100 * time.Millisecond)
	}
	gr.CPUImplicit, gr.CPUKube = b.implicitSrv.cpu()-cpuI, b.kubeSrv.cpu()-cpuK
	after, err := b.implicitSrv.metrics(ctx, "implicit_watch_events_delivered_total")
	if err != nil {
		return err
	}
	gr.EventsDelivered = after["implicit_watch_events_delivered_total"] - before["implicit_watch_events_delivered_total"]
	gr.Reconnects = f.reconnects.Load() - reconnects
	gr.NativeReconnects = nf.reconnects.Load() - nativeReconnects
	fmt.Printf("  implicit, last of %d namespace watchers: %s\n", len(b.tenants), gr.Implicit)
	fmt.Printf("  implicit, the -A watcher has all %d:      %s\n", len(b.tenants), gr.ImplicitAll)
	fmt.Printf("  native watch cache, last of %d watchers of %s/%s: %s\n", nf.open, globalNS, name, gr.Native)
	fmt.Printf("  views / native: median %s, p99 %s; native reconnects %d\n", ratio(gr.Implicit.median(), gr.Native.median()), ratio(gr.Implicit.p99(), gr.Native.p99()), gr.NativeReconnects)
	fmt.Printf("  CPU: implicit-apiserver %s, kube-apiserver (proxying, and serving the native watchers) %s for %.0f delivered events: %s and %s per event; reconnects %d\n",
		gr.CPUImplicit, gr.CPUKube, gr.EventsDelivered, perEvent(gr.CPUImplicit, gr.EventsDelivered), perEvent(gr.CPUKube, gr.EventsDelivered), gr.Reconnects)
	return nil
}

func perEvent(d time.Duration, events float64) string {
	if events == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond)/events)
}

// reads times lists of one tenant's view against a native list of as many
// real RoleBindings, and the -A view list when it is not too large. Bodies
// are fetched as JSON bytes, not decoded: the figures are the servers'.
func (b *bench) reads(ctx context.Context, gr *gResult) error {
	tenant := b.tenants[len(b.tenants)/2]
	var err error
	if gr.ViewOne, gr.ViewOneItems, err = b.timeList(ctx, "/apis/implicit.dev/v1alpha1/namespaces/"+tenant+"/rolebindings", ""); err != nil {
		return err
	}
	if gr.NativeOne, gr.NativeOneItems, err = b.timeList(ctx, "/apis/rbac.authorization.k8s.io/v1/namespaces/"+nativeNS+"/rolebindings", ""); err != nil {
		return err
	}
	// The same view list straight from implicit-apiserver's port: the
	// difference is the aggregator's proxy hop.
	direct := func(ctx context.Context) (int, error) {
		body, err := b.implicitSrv.client.CoreV1().RESTClient().Get().AbsPath("/apis/implicit.dev/v1alpha1/namespaces/"+tenant+"/rolebindings").
			SetHeader("Accept", "application/json").DoRaw(ctx)
		return bytes.Count(body, []byte(`"uid":`)), err
	}
	for range b.o.listRuns {
		start := time.Now()
		if _, err := direct(ctx); err != nil {
			return err
		}
		gr.ViewOneDirect = append(gr.ViewOneDirect, time.Since(start))
	}
	fmt.Printf("  list one namespace, view (%d items):   %s; straight from implicit-apiserver (no aggregator hop): %s\n", gr.ViewOneItems, gr.ViewOne, gr.ViewOneDirect)
	fmt.Printf("  list one namespace, native (%d items): %s; view/native %s\n", gr.NativeOneItems, gr.NativeOne, ratio(gr.ViewOne.median(), gr.NativeOne.median()))
	if expect := (len(b.tenants) + len(b.orgs)) * gr.G; expect > b.o.maxListAll {
		fmt.Printf("  list -A of the view skipped: about %d items, over -max-list-all=%d\n", expect, b.o.maxListAll)
		return nil
	}
	if gr.ViewAll, gr.ViewAllItems, err = b.timeList(ctx, "/apis/implicit.dev/v1alpha1/rolebindings", "", min(b.o.listRuns, 5)); err != nil {
		return err
	}
	fmt.Printf("  list -A of the view (%d items): %s\n", gr.ViewAllItems, gr.ViewAll)
	return nil
}

// timeList GETs path (with fieldSelector when set) runs times, as JSON, and
// returns the durations and the number of items.
func (b *bench) timeList(ctx context.Context, path, fieldSelector string, runs ...int) (samples, int, error) {
	n := b.o.listRuns
	if len(runs) > 0 {
		n = runs[0]
	}
	var s samples
	items := 0
	for range n {
		req := b.kube.CoreV1().RESTClient().Get().AbsPath(path).SetHeader("Accept", "application/json")
		if fieldSelector != "" {
			req = req.Param("fieldSelector", fieldSelector)
		}
		start := time.Now()
		body, err := req.DoRaw(ctx)
		if err != nil {
			return nil, 0, fmt.Errorf("GET %s: %w", path, err)
		}
		s = append(s, time.Since(start))
		items = bytes.Count(body, []byte(`"uid":`))
	}
	return s, items, nil
}

// measureCopy times the copy way: a real copy of global-0 in every tenant,
// N native watchers and a native -A one, and the N copies updated
// unthrottled and at QPS 50 until every watcher has its MODIFIED.
func (b *bench) measureCopy(ctx context.Context, res *nResult) error {
	c := &res.Copy
	fmt.Printf("N=%d, the copy way:\n", b.n)
	var err error
	// Who sees global-0: N view items, the same count as the native -A list below.
	if c.ViewWhoSees, c.ViewWhoSeesItems, err = b.timeList(ctx, "/apis/implicit.dev/v1alpha1/rolebindings", "metadata.name="+globalName(0)); err != nil {
		return err
	}
	fmt.Printf("  list -A of the view, one name (who sees %s, %d items): %s\n", globalName(0), c.ViewWhoSeesItems, c.ViewWhoSees)

	c.MemBefore = b.memory(ctx, "before the copies")
	unthrottled := rest.CopyConfig(b.cfg)
	unthrottled.QPS, unthrottled.Burst = -1, 0 // no client-side rate limit; copyWorkers bound it
	fast, err := kubernetes.NewForConfig(unthrottled)
	if err != nil {
		return err
	}
	name := globalName(0)
	start := time.Now()
	b.prog.show("creating %d copies N=%d", b.n, b.n)
	if err := parallel(ctx, len(b.tenants), copyWorkers, func(ctx context.Context, i int) error {
		_, err := fast.RbacV1().RoleBindings(b.tenants[i]).Create(ctx, roleBinding(name), metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	c.Create = time.Since(start)
	fmt.Printf("  %d copies created (unthrottled, %d workers) in %s\n", len(b.tenants), copyWorkers, dur(c.Create))
	c.MemCopies = b.memory(ctx, fmt.Sprintf("with %d copies", len(b.tenants)))
	if c.NativeAll, c.NativeAllItems, err = b.timeList(ctx, "/apis/rbac.authorization.k8s.io/v1/rolebindings", ""); err != nil {
		return err
	}
	fmt.Printf("  list -A native RoleBindings (%d items): %s; view one name -A / native -A %s\n", c.NativeAllItems, c.NativeAll, ratio(c.ViewWhoSees.median(), c.NativeAll.median()))
	b.prog.step("copies created N=%d", b.n)

	f, err := b.startFleet(ctx, viewFleet(nativeRoleBindings, b.tenants, true), b.tenants)
	if err != nil {
		return err
	}
	defer f.stop()
	c.MemWatchers = b.memory(ctx, fmt.Sprintf("with %d native watchers", f.open))
	b.prog.step("native watchers open N=%d", b.n)

	throttled := rest.CopyConfig(b.cfg)
	throttled.QPS, throttled.Burst = copyQPS, copyQPS
	slow, err := kubernetes.NewForConfig(throttled)
	if err != nil {
		return err
	}
	cases := []struct {
		what    string
		client  kubernetes.Interface
		workers int
		runs    int
		out     *samples
	}{
		{fmt.Sprintf("unthrottled, %d workers", copyWorkers), fast, copyWorkers, b.o.copyRuns, &c.Unthrottled},
		{fmt.Sprintf("QPS %d Burst %d (HNC's default), %d workers", copyQPS, copyQPS, workers), slow, workers, b.o.slowCopyRuns, &c.QPS50},
	}
	for ci, cs := range cases {
		cpuK, cpuE, events := b.kubeSrv.cpu(), b.etcdSrv.cpu(), f.events.Load()
		for i := range cs.runs {
			r := newRound(name, fmt.Sprintf("copy-%d-%d", ci, i+1), len(b.tenants), len(b.tenants), true)
			timeout := roundTimeout + time.Duration(len(b.tenants)/copyQPS)*time.Second
			last, all, err := f.measure(ctx, r, timeout, func(ctx context.Context) error {
				return parallel(ctx, len(b.tenants), cs.workers, func(ctx context.Context, j int) error {
					_, err := cs.client.RbacV1().RoleBindings(b.tenants[j]).Patch(ctx, name, types.MergePatchType, labelPatch(r.value), metav1.PatchOptions{})
					return err
				})
			})
			if err != nil {
				return fmt.Errorf("%s: %w", cs.what, err)
			}
			*cs.out = append(*cs.out, max(last, all))
			b.prog.step("copy N=%d %s run %d: %s", b.n, cs.what, i+1, dur(max(last, all)))
			time.Sleep(100 * time.Millisecond)
		}
		if ci == 0 {
			c.CPUKube, c.CPUEtcd, c.EventsDelivered = b.kubeSrv.cpu()-cpuK, b.etcdSrv.cpu()-cpuE, float64(f.events.Load()-events)
		}
		if cs.runs > 0 {
			fmt.Printf("  copy %s, until the last native watcher (and the -A one) has it: %s\n", cs.what, *cs.out)
		}
	}
	fmt.Printf("  CPU of the unthrottled copies: kube-apiserver %s, etcd %s for %d writes and %.0f delivered events (%s per event, kube-apiserver + etcd)\n",
		c.CPUKube, c.CPUEtcd, len(b.tenants)*b.o.copyRuns, c.EventsDelivered, perEvent(c.CPUKube+c.CPUEtcd, c.EventsDelivered))
	return nil
}
