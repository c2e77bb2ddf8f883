package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// materializeConfig is the ImplicitConfiguration of the bench's
// implicit-apiserver when -materialize-runs > 0: the three kinds served
// without --config, networkpolicies with delivery: Materialize (global
// namespace: the server's, implicit-global).
const materializeConfig = `apiVersion: config.implicit.dev/v1alpha1
kind: ImplicitConfiguration
resources:
- {group: rbac.authorization.k8s.io, version: v1, resource: rolebindings}
- {group: rbac.authorization.k8s.io, version: v1, resource: roles}
- {group: networking.k8s.io, version: v1, resource: networkpolicies, delivery: Materialize}
`

// matPolicy is the global NetworkPolicy whose copies are timed.
const matPolicy = "bench-default-deny"

// serverDefaultMaterializeQPS is implicit-apiserver's --materialize-qps
// default, HNC's rate.
const serverDefaultMaterializeQPS = 50

// Materialization metrics of implicit-apiserver (pkg/materialize).
const (
	metricMatWrites   = "implicit_materialize_writes_total"
	metricMatLagSum   = "implicit_materialize_lag_seconds_sum"
	metricMatLagCount = "implicit_materialize_lag_seconds_count"
	metricMatPending  = "implicit_materialize_pending_namespaces"
)

// materializeArgs writes the configuration under work and returns the
// flags that make implicit-apiserver materialize networkpolicies at
// -materialize-qps; none when -materialize-runs is 0 (the server then runs
// as it would without --config).
func materializeArgs(o options, work string) ([]string, error) {
	if o.materializeRuns == 0 && o.policyRuns == 0 {
		return nil, nil
	}
	config := materializeConfig
	if o.materializeRuns == 0 {
		config = strings.Replace(config, ", delivery: Materialize", "", 1)
	}
	if o.policyRuns > 0 {
		config += policyConfigLine
	}
	path := filepath.Join(work, "implicit-configuration.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return nil, err
	}
	return []string{
		"--config=" + path,
		"--materialize-qps=" + strconv.FormatFloat(o.materializeQPS, 'f', -1, 64),
		"--materialize-burst=" + strconv.Itoa(materializeBurst(o.materializeQPS)),
	}, nil
}

// materializeBurst is the burst given with -materialize-qps: one second's
// worth, so that the limiter's average is the QPS from the first write on.
func materializeBurst(qps float64) int { return max(1, int(math.Ceil(qps))) }

// copyWatch is one native -A watch of the materialized copies of
// networkpolicies (label implicit.dev/materialized=true), counting, for
// the current round, each expected namespace once when its copy of the
// round's name carries the round's bench label value (ADDED or MODIFIED).
//
// One goroutine reads the watch, reconnecting from the last version seen
// if the server closes it; stop cancels it and waits.
type copyWatch struct {
	expect     map[string]bool
	current    atomic.Pointer[round]
	events     atomic.Int64
	reconnects atomic.Int64
	errors     atomic.Int64
	cancel     context.CancelFunc
	wg         sync.WaitGroup
}

// copyEvent is all the copy watch decodes of an event.
type copyEvent struct {
	Type   string `json:"type"`
	Object struct {
		Metadata struct {
			Name            string `json:"name"`
			Namespace       string `json:"namespace"`
			ResourceVersion string `json:"resourceVersion"`
			Labels          struct {
				Run string `json:"bench.implicit.dev/run"`
			} `json:"labels"`
		} `json:"metadata"`
	} `json:"object"`
}

// watchCopies lists the copies once and watches them from the list's
// resourceVersion, informer-style.
func (b *bench) watchCopies(ctx context.Context, expect []string) (*copyWatch, error) {
	return b.watchNetworkPolicies(ctx, v1alpha1.LabelMaterialized+"=true", expect)
}

// watchNetworkPolicies is watchCopies for the NetworkPolicies of any label
// selector (the same-kind copier's copies).
func (b *bench) watchNetworkPolicies(ctx context.Context, selector string, expect []string) (*copyWatch, error) {
	cs, err := b.clients(1)
	if err != nil {
		return nil, err
	}
	c := cs[0]
	const path = "/apis/networking.k8s.io/v1/networkpolicies"
	body, err := c.get(ctx, path, url.Values{"labelSelector": {selector}})
	if err != nil {
		return nil, fmt.Errorf("list copies: %w", err)
	}
	var l struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	err = json.NewDecoder(body).Decode(&l)
	body.Close()
	if err != nil {
		return nil, fmt.Errorf("list copies: %w", err)
	}
	rv := l.Metadata.ResourceVersion
	query := func() url.Values {
		return url.Values{"watch": {"1"}, "resourceVersion": {rv}, "allowWatchBookmarks": {"true"}, "labelSelector": {selector}}
	}
	// The watch lives on a context of its own: stop ends it.
	ctx, cancel := context.WithCancel(ctx)
	if body, err = c.get(ctx, path, query()); err != nil {
		cancel()
		return nil, fmt.Errorf("watch copies: %w", err)
	}
	w := &copyWatch{expect: map[string]bool{}, cancel: cancel}
	for _, ns := range expect {
		w.expect[ns] = true
	}
	w.wg.Go(func() {
		seen := map[string]string{} // namespace -> the last round value counted
		follow(ctx, c, path, query, body, &w.reconnects, func(ev *copyEvent) {
			if w.event(ev, seen) {
				rv = ev.Object.Metadata.ResourceVersion
			}
		})
	})
	return w, nil
}

// event counts one decoded event for the current round. It returns whether
// the event carries a resourceVersion to resume from.
func (w *copyWatch) event(ev *copyEvent, seen map[string]string) bool {
	switch ev.Type {
	case "ERROR":
		w.errors.Add(1)
		return false
	case "BOOKMARK":
		return true
	case "ADDED", "MODIFIED":
	default:
		w.events.Add(1)
		return true
	}
	w.events.Add(1)
	meta := &ev.Object.Metadata
	r := w.current.Load()
	if r == nil || meta.Name != r.name || meta.Labels.Run != r.value || !w.expect[meta.Namespace] || seen[meta.Namespace] == r.value {
		return true
	}
	seen[meta.Namespace] = r.value
	if r.left.Add(-1) == 0 {
		r.lastAt.Store(time.Now().UnixNano())
		close(r.done)
	}
	return true
}

// measure installs a round (the copies of name with the bench label value),
// calls change, and waits until every expected namespace has its copy. It
// returns the time from just before change to the last copy.
func (w *copyWatch) measure(ctx context.Context, name, value string, timeout time.Duration, change func(ctx context.Context) error) (time.Duration, error) {
	r := newRound(name, value, len(w.expect), 0, false)
	w.current.Store(r)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	if err := change(ctx); err != nil {
		return 0, err
	}
	select {
	case <-r.done:
		return since(start, r.lastAt.Load()), nil
	case <-ctx.Done():
		return 0, fmt.Errorf("%d of %d namespaces still without their copy of %s with %s=%s after %s (copy events %d, reconnects %d, errors %d): %w",
			r.left.Load(), len(w.expect), name, labelBench, value, timeout, w.events.Load(), w.reconnects.Load(), w.errors.Load(), ctx.Err())
	}
}

func (w *copyWatch) stop() {
	w.cancel()
	w.wg.Wait()
}

// measureMaterialize times the materialization of one global NetworkPolicy
// (networkpolicies are configured with delivery: Materialize): its
// creation, then -materialize-runs label edits, each until the native -A
// watch of the copies has, for every namespace that inherits (tenants, orgs
// and default), its copy with the edit's label value. Writes per second
// are copies over that time.
func (b *bench) measureMaterialize(ctx context.Context, res *nResult) error {
	if b.o.materializeRuns == 0 {
		return nil
	}
	m := &materializeResult{QPS: b.o.materializeQPS, Burst: materializeBurst(b.o.materializeQPS)}
	res.Materialize = m
	// Every namespace that inherits: the tenants, their orgs, and default
	// (a tenant too: only kube-system, kube-public and kube-node-lease are
	// excluded by default).
	expect := slices.Concat(b.tenants, b.orgs, []string{metav1.NamespaceDefault})
	m.Copies = len(expect)
	fmt.Printf("N=%d, materialized (delivery: Materialize), one global NetworkPolicy to %d namespaces (tenants, orgs and default), --materialize-qps %g --materialize-burst %d:\n",
		b.n, m.Copies, m.QPS, m.Burst)
	w, err := b.watchCopies(ctx, expect)
	if err != nil {
		return err
	}
	defer w.stop()
	// A round's deadline: the round timeout, plus the slower of the rate
	// limiter's pace for two requests per copy (room for a conflict's
	// read) and 50 copies a second (the copy baseline's QPS 50 allowance).
	timeout := roundTimeout + max(2*floorAt(m.Copies, m.QPS), floorAt(m.Copies, copyQPS))

	before, err := b.implicitSrv.metrics(ctx, metricMatWrites)
	if err != nil {
		return err
	}
	b.prog.show("materializing %s to %d namespaces N=%d", matPolicy, m.Copies, b.n)
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: matPolicy, Namespace: globalNS, Labels: map[string]string{labelBench: "mat-create"}},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}
	if m.Create, err = w.measure(ctx, matPolicy, "mat-create", timeout, func(ctx context.Context) error {
		_, err := b.kube.NetworkingV1().NetworkPolicies(globalNS).Create(ctx, np, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	mid, err := b.settledMetrics(ctx, before[metricMatWrites]+float64(m.Copies))
	if err != nil {
		return err
	}
	m.CreateWrites = mid[metricMatWrites] - before[metricMatWrites]
	b.prog.step("materialized create N=%d: last copy %s (%.0f writes/s)", b.n, dur(m.Create), perSecond(m.Copies, m.Create))

	cpuI, cpuK, cpuE := b.implicitSrv.cpu(), b.kubeSrv.cpu(), b.etcdSrv.cpu()
	for i := range b.o.materializeRuns {
		time.Sleep(100 * time.Millisecond)
		if i == 0 && b.o.roundsProfile > 0 {
			// Where a write's CPU goes, from the first edit on.
			tag := fmt.Sprintf("N%d-materialize", b.n)
			waitI := b.implicitSrv.cpuProfile(ctx, b.o.outDir, tag, b.o.roundsProfile)
			waitK := b.kubeSrv.cpuProfile(ctx, b.o.outDir, tag, b.o.roundsProfile)
			defer waitK()
			defer waitI()
		}
		value := fmt.Sprintf("mat-%d", i+1)
		d, err := w.measure(ctx, matPolicy, value, timeout, func(ctx context.Context) error {
			_, err := b.kube.NetworkingV1().NetworkPolicies(globalNS).Patch(ctx, matPolicy, types.MergePatchType, labelPatch(value), metav1.PatchOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("edit %d: %w", i+1, err)
		}
		m.Edits = append(m.Edits, d)
		b.prog.step("materialized edit N=%d run %d: last copy %s (%.0f writes/s)", b.n, i+1, dur(d), perSecond(m.Copies, d))
	}
	m.CPUImplicit, m.CPUKube, m.CPUEtcd = b.implicitSrv.cpu()-cpuI, b.kubeSrv.cpu()-cpuK, b.etcdSrv.cpu()-cpuE
	after, err := b.settledMetrics(ctx, mid[metricMatWrites]+float64(m.Copies*len(m.Edits)))
	if err != nil {
		return err
	}
	m.EditWrites = after[metricMatWrites] - mid[metricMatWrites]
	if n := after[metricMatLagCount] - mid[metricMatLagCount]; n > 0 {
		m.LagMean = time.Duration((after[metricMatLagSum] - mid[metricMatLagSum]) / n * float64(time.Second))
		m.LagObserved = n
	}
	m.Pending = after[metricMatPending]
	m.Reconnects = w.reconnects.Load()

	fmt.Printf("  create, until every namespace has its copy: %s (%.0f writes/s); %.0f writes (%s)\n", dur(m.Create), perSecond(m.Copies, m.Create), m.CreateWrites, metricMatWrites)
	fmt.Printf("  edit, until every namespace has the edited copy: %s; writes/s at the median %.0f\n", m.Edits, perSecond(m.Copies, m.Edits.median()))
	fmt.Printf("  the rate limiter's floor at --materialize-qps %g: %s per edit and for the create (one write per copy); at the server's default QPS %d: %s per edit\n",
		m.QPS, dur(floorAt(m.Copies, m.QPS)), serverDefaultMaterializeQPS, dur(floorAt(m.Copies, serverDefaultMaterializeQPS)))
	if c := res.Copy.Unthrottled.median(); c > 0 {
		mat, copier := perSecond(m.Copies, m.Edits.median()), perSecond(len(b.tenants), c)
		fmt.Printf("  beside the copier (%d workers, no rate limit, the same user: admin, system:masters, API Priority and Fairness's exempt level, as implicit-apiserver's host client): materialized %.0f writes/s, copier %.0f writes/s (%d copies in %s, median): materialized / copier %s; by the means of every round (%d edits, %d copier rounds): %s\n",
			copyWorkers, mat, copier, len(b.tenants), dur(c), speedRatio(mat, copier),
			len(m.Edits), len(res.Copy.Unthrottled), speedRatio(perSecond(m.Copies, m.Edits.mean()), perSecond(len(b.tenants), res.Copy.Unthrottled.mean())))
	}
	if b.o.sameKindCopyRuns > 0 {
		w.stop()
		if err := b.measureSameKindCopier(ctx, m, expect, timeout); err != nil {
			return fmt.Errorf("same-kind copier: %w", err)
		}
		mat, copier := perSecond(m.Copies, m.Edits.median()), perSecond(m.Copies, m.SameKind.median())
		fmt.Printf("  beside a copier of the same kind (%d workers, no rate limit, the same user; a merge patch of a label of one NetworkPolicy in each of the %d namespaces): materialized %.0f writes/s, copier %.0f writes/s (%s, median): materialized / copier %s; by the means of every round (%d and %d): %s; create: materialized %.0f writes/s, copier %.0f writes/s (%s): %s\n",
			copyWorkers, m.Copies, mat, copier, dur(m.SameKind.median()), speedRatio(mat, copier),
			len(m.Edits), len(m.SameKind), speedRatio(perSecond(m.Copies, m.Edits.mean()), perSecond(m.Copies, m.SameKind.mean())),
			perSecond(m.Copies, m.Create), perSecond(m.Copies, m.SameKindCreate), dur(m.SameKindCreate), speedRatio(perSecond(m.Copies, m.Create), perSecond(m.Copies, m.SameKindCreate)))
		fmt.Printf("  CPU over the same-kind copier's patches: kube-apiserver %s, etcd %s, implicit-apiserver %s (its views of the tenants' own NetworkPolicies): per write %s, %s, %s\n",
			m.SameKindCPUKube, m.SameKindCPUEtcd, m.SameKindCPUImplicit, perEvent(m.SameKindCPUKube, m.SameKindWrites), perEvent(m.SameKindCPUEtcd, m.SameKindWrites), perEvent(m.SameKindCPUImplicit, m.SameKindWrites))
	}
	fmt.Printf("  materializer's metrics over the edits: %.0f writes (%.2f per copy), mean namespace lag %s over %.0f namespaces, pending at the end %.0f; copy watch reconnects %d\n",
		m.EditWrites, m.EditWrites/float64(max(1, m.Copies*len(m.Edits))), dur(m.LagMean), m.LagObserved, m.Pending, m.Reconnects)
	fmt.Printf("  CPU over the edits: implicit-apiserver %s, kube-apiserver %s, etcd %s: per write %s, %s, %s\n",
		m.CPUImplicit, m.CPUKube, m.CPUEtcd, perEvent(m.CPUImplicit, m.EditWrites), perEvent(m.CPUKube, m.EditWrites), perEvent(m.CPUEtcd, m.EditWrites))
	return nil
}

// sameKindCopy is the NetworkPolicy the same-kind copier writes in every
// namespace that inherits, and sameKindLabel the label its watch selects.
const (
	sameKindCopy  = "bench-np-copier"
	sameKindLabel = "bench.implicit.dev/np-copier"
)

// measureSameKindCopier times a client copier of the materialized kind:
// copyWorkers workers, no rate limit, the bench's admin (the materializer's
// host client's user in the bench), creating one NetworkPolicy in each of
// expect, then -same-kind-copy-runs times merge-patching a label of each,
// every round until one -A watch of them (their own label selector) has
// every namespace's copy with the round's label. The RoleBinding copier
// (measureCopy) writes another kind, whose writes cost kube-apiserver
// differently; this one writes the kind the materializer writes, to the
// same namespaces. Its objects are the tenants' own (not copies), so
// implicit-apiserver's views of those namespaces change with each write,
// as they do with the RoleBinding copier's.
func (b *bench) measureSameKindCopier(ctx context.Context, m *materializeResult, expect []string, timeout time.Duration) error {
	w, err := b.watchNetworkPolicies(ctx, sameKindLabel+"=true", expect)
	if err != nil {
		return err
	}
	defer w.stop()
	unthrottled := rest.CopyConfig(b.cfg)
	unthrottled.QPS, unthrottled.Burst = -1, 0 // no client-side rate limit; copyWorkers bound it
	fast, err := kubernetes.NewForConfig(unthrottled)
	if err != nil {
		return err
	}
	b.prog.show("same-kind copier: creating %d NetworkPolicies N=%d", len(expect), b.n)
	if m.SameKindCreate, err = w.measure(ctx, sameKindCopy, "npc-create", timeout, func(ctx context.Context) error {
		return parallel(ctx, len(expect), copyWorkers, func(ctx context.Context, i int) error {
			np := &networkingv1.NetworkPolicy{
				ObjectMeta: metav1.ObjectMeta{Name: sameKindCopy, Namespace: expect[i], Labels: map[string]string{sameKindLabel: "true", labelBench: "npc-create"}},
				Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
			}
			_, err := fast.NetworkingV1().NetworkPolicies(expect[i]).Create(ctx, np, metav1.CreateOptions{})
			return err
		})
	}); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	b.prog.step("same-kind copier create N=%d: last copy %s (%.0f writes/s)", b.n, dur(m.SameKindCreate), perSecond(len(expect), m.SameKindCreate))
	cpuI, cpuK, cpuE := b.implicitSrv.cpu(), b.kubeSrv.cpu(), b.etcdSrv.cpu()
	for i := range b.o.sameKindCopyRuns {
		time.Sleep(100 * time.Millisecond)
		value := fmt.Sprintf("npc-%d", i+1)
		d, err := w.measure(ctx, sameKindCopy, value, timeout, func(ctx context.Context) error {
			return parallel(ctx, len(expect), copyWorkers, func(ctx context.Context, j int) error {
				_, err := fast.NetworkingV1().NetworkPolicies(expect[j]).Patch(ctx, sameKindCopy, types.MergePatchType, labelPatch(value), metav1.PatchOptions{})
				return err
			})
		})
		if err != nil {
			return fmt.Errorf("patch %d: %w", i+1, err)
		}
		m.SameKind = append(m.SameKind, d)
		b.prog.step("same-kind copier N=%d run %d: last copy %s (%.0f writes/s)", b.n, i+1, dur(d), perSecond(len(expect), d))
	}
	m.SameKindCPUImplicit, m.SameKindCPUKube, m.SameKindCPUEtcd = b.implicitSrv.cpu()-cpuI, b.kubeSrv.cpu()-cpuK, b.etcdSrv.cpu()-cpuE
	m.SameKindWrites = float64(len(expect) * len(m.SameKind))
	return nil
}

// settledMetrics reads the materializer's metrics once its writes counter
// has reached writes, or after 5 seconds: the watch may see the last copies
// before the workers writing them have counted them.
func (b *bench) settledMetrics(ctx context.Context, writes float64) (map[string]float64, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := b.implicitSrv.metrics(ctx, metricMatWrites, metricMatLagSum, metricMatLagCount, metricMatPending)
		if err != nil || v[metricMatWrites] >= writes || time.Now().After(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// perSecond is n over d, per second (0 when d is).
func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// floorAt is n requests at qps: the rate limiter's pace, its burst aside
// (one second's worth with -materialize-qps, 100 with the server's default).
func floorAt(n int, qps float64) time.Duration {
	return time.Duration(float64(n) / qps * float64(time.Second))
}
