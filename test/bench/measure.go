package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/implicit-dev/implicit-apiserver/test/controlplane"
)

var roundTimeout = 2 * time.Minute

const (
	nativeNS = "bench-native"
	// copyQPS is a copy controller's write rate (HNC's default
	// --apiserver-qps-throttle).
	copyQPS = 50
)

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func labelPatch(value string) []byte {
	return fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, labelBench, value)
}

// reads times R lists of one tenant's view, of a native namespace holding
// as many real RoleBindings, and of the -A view.
func (b *bench) reads(ctx context.Context) error {
	fmt.Println("reads:")
	if err := b.createNamespace(ctx, nativeNS, map[string]string{"implicit.dev/inherit": "false"}); err != nil {
		return err
	}
	if err := parallel(ctx, "", b.o.globals, workers, func(ctx context.Context, i int) error {
		_, err := b.kube.RbacV1().RoleBindings(nativeNS).Create(ctx, roleBinding(globalName(i)), metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	tenant := b.tenants[len(b.tenants)/2]
	timeList := func(what string, list func(ctx context.Context) (int, error)) (time.Duration, error) {
		var ds []time.Duration
		items := 0
		for range b.o.runs {
			start := time.Now()
			n, err := list(ctx)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", what, err)
			}
			ds = append(ds, time.Since(start))
			items = n
		}
		fmt.Printf("  %-52s %6d items  median %s  max %s\n", what, items, ms(median(ds)), ms(slices.Max(ds)))
		return median(ds), nil
	}
	view, err := timeList("view list (rolebindings.implicit.dev -n "+tenant+")", func(ctx context.Context) (int, error) {
		l, err := b.dyn.Resource(viewRoleBindings).Namespace(tenant).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		return len(l.Items), nil
	})
	if err != nil {
		return err
	}
	native, err := timeList("native list (rolebindings -n "+nativeNS+")", func(ctx context.Context) (int, error) {
		l, err := b.dyn.Resource(nativeRoleBindings).Namespace(nativeNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		return len(l.Items), nil
	})
	if err != nil {
		return err
	}
	all, err := timeList("view list -A (rolebindings.implicit.dev -A)", func(ctx context.Context) (int, error) {
		l, err := b.dyn.Resource(viewRoleBindings).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		return len(l.Items), nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("  ratio view/native (one namespace): %.2f; -A view/native one namespace: %.0f\n",
		float64(view)/float64(native), float64(all)/float64(native))
	return nil
}

// implicitPropagation edits one global RoleBinding R times and times the
// MODIFIED events of its view item in every tenant's watcher and the -A one.
func (b *bench) implicitPropagation(ctx context.Context) (time.Duration, error) {
	fmt.Println("propagation, implicit (one global edit, view watchers):")
	f, err := b.startFleet(ctx, viewRoleBindings, b.tenants, true)
	if err != nil {
		return 0, err
	}
	defer f.stop()
	b.memory(ctx, "with the view watchers open")
	name := globalName(0)
	var lasts, alls []time.Duration
	for i := range b.o.runs {
		r := newRound(name, "implicit-"+strconv.Itoa(i+1), len(b.tenants), len(b.tenants), true)
		last, all, err := f.measure(ctx, r, roundTimeout, func(ctx context.Context) error {
			_, err := b.kube.RbacV1().RoleBindings(globalNS).Patch(ctx, name, types.MergePatchType, labelPatch(r.value), metav1.PatchOptions{})
			return err
		})
		if err != nil {
			return 0, err
		}
		fmt.Printf("  run %d: last of %d namespace watchers %s, -A watcher (all %d tenants) %s\n", i+1, len(b.tenants), ms(last), len(b.tenants), ms(all))
		lasts, alls = append(lasts, last), append(alls, all)
	}
	fmt.Printf("  implicit: last namespace watcher median %s max %s; -A watcher median %s max %s (reconnects %d)\n",
		ms(median(lasts)), ms(slices.Max(lasts)), ms(median(alls)), ms(slices.Max(alls)), f.reconnects.Load())
	return median(lasts), nil
}

// copyPropagation puts a real copy of the global RoleBinding in every
// tenant, then times R rounds of updating the N copies (at QPS 500 and at a
// copy controller's QPS 50) until every native watcher has its MODIFIED.
func (b *bench) copyPropagation(ctx context.Context, implicitMedian time.Duration) error {
	fmt.Println("propagation, the copy way (N RoleBinding writes, native watchers):")
	name := globalName(0)
	if err := parallel(ctx, "created copies", len(b.tenants), workers, func(ctx context.Context, i int) error {
		_, err := b.kube.RbacV1().RoleBindings(b.tenants[i]).Create(ctx, roleBinding(name), metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	f, err := b.startFleet(ctx, nativeRoleBindings, b.tenants, false)
	if err != nil {
		return err
	}
	defer f.stop()

	throttled := rest.CopyConfig(b.cfg)
	throttled.QPS, throttled.Burst = copyQPS, copyQPS
	slow, err := kubernetes.NewForConfig(throttled)
	if err != nil {
		return err
	}
	cases := []struct {
		what   string
		client kubernetes.Interface
	}{{"QPS 500, 16 goroutines", b.kube}}
	if expected := time.Duration(len(b.tenants)*b.o.runs/copyQPS) * time.Second; b.o.short || expected < 2*time.Minute {
		cases = append(cases, struct {
			what   string
			client kubernetes.Interface
		}{fmt.Sprintf("QPS %d Burst %d (a copy controller's default), 16 goroutines", copyQPS, copyQPS), slow})
	} else {
		fmt.Printf("  QPS %d case skipped: N*R/%d = %s, over 2 minutes\n", copyQPS, copyQPS, expected)
	}
	for ci, c := range cases {
		var lasts []time.Duration
		for i := range b.o.runs {
			r := newRound(name, fmt.Sprintf("copy-%d-%d", ci, i+1), len(b.tenants), 0, false)
			timeout := roundTimeout + time.Duration(len(b.tenants)/copyQPS)*time.Second
			last, _, err := f.measure(ctx, r, timeout, func(ctx context.Context) error {
				return parallel(ctx, "", len(b.tenants), workers, func(ctx context.Context, j int) error {
					_, err := c.client.RbacV1().RoleBindings(b.tenants[j]).Patch(ctx, name, types.MergePatchType, labelPatch(r.value), metav1.PatchOptions{})
					return err
				})
			})
			if err != nil {
				return fmt.Errorf("%s: %w", c.what, err)
			}
			fmt.Printf("  %s, run %d: last of %d native watchers %s\n", c.what, i+1, len(b.tenants), ms(last))
			lasts = append(lasts, last)
		}
		fmt.Printf("  copy, %s: median %s max %s; ratio copy/implicit %.0fx\n",
			c.what, ms(median(lasts)), ms(slices.Max(lasts)), float64(median(lasts))/float64(implicitMedian))
	}
	return nil
}

// memory prints implicit-apiserver's and kube-apiserver's VmRSS, and the Go
// heap in use that each reports in its /metrics.
func (b *bench) memory(ctx context.Context, when string) {
	ia, ka := b.implicit.Process(), b.cp.KubeAPIServer()
	iHeap := b.heap(ctx, b.implicit.URL())
	kHeap := b.heap(ctx, b.cp.APIServerURL())
	fmt.Printf("memory %s: implicit-apiserver VmRSS %s (Go heap in use %s), kube-apiserver VmRSS %s (Go heap in use %s)\n",
		when, vmRSS(ia), iHeap, vmRSS(ka), kHeap)
}

func vmRSS(p *controlplane.Process) string {
	if p == nil {
		return "n/a"
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return "n/a"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "n/a"
}

// heap reads go_memstats_heap_inuse_bytes from the server at url, as admin.
func (b *bench) heap(ctx context.Context, url string) string {
	cfg := rest.CopyConfig(b.cfg)
	cfg.Host = url
	cfg.CAData, cfg.CAFile, cfg.Insecure = nil, "", true // loopback; implicit-apiserver self-signs
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "n/a"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	body, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return "n/a"
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return "n/a"
			}
			return fmt.Sprintf("%.0f MiB", f/(1<<20))
		}
	}
	return "n/a"
}
