package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// results are the whole sweep's figures; results.json holds them as
// measured (durations in nanoseconds), results.md as tables.
type results struct {
	Command string        `json:"command"`
	Machine string        `json:"machine"`
	Started time.Time     `json:"started"`
	Wall    time.Duration `json:"wall"`
	Ns      []*nResult    `json:"n"`
	// Switch is the replica switch (-replica-switch), instead of Ns.
	Switch []*switchResult `json:"replicaSwitch,omitempty"`
}

type nResult struct {
	N         int           `json:"n"`
	Orgs      int           `json:"orgs"`
	SetupTime time.Duration `json:"setup"`
	Total     time.Duration `json:"total"`
	G         []*gResult    `json:"g"`
	Slow      slowResult    `json:"slow"`
	Copy      copyResult    `json:"copy"`
	Authz     authzResult   `json:"authz"`
	// Materialize is nil when -materialize-runs is 0.
	Materialize *materializeResult `json:"materialize,omitempty"`
	// Policies is nil when -policy-runs is 0.
	Policies *policyResult `json:"policies,omitempty"`
	// Alone is the fan-out with each fleet alone (issue 32); nil with
	// -alone-repeats 0.
	Alone *aloneResult `json:"alone,omitempty"`
}

type gResult struct {
	G                                          int           `json:"g"`
	Mem                                        memPair       `json:"mem"`
	MemWatchers                                memPair       `json:"memWatchers"`
	Watchers                                   int           `json:"watchers"`
	ViewOne, NativeOne, ViewAll                samples       `json:",omitempty"`
	ViewOneDirect                              samples       `json:",omitempty"`
	ViewOneItems, NativeOneItems, ViewAllItems int           `json:",omitempty"`
	Implicit                                   samples       `json:"implicit"`
	ImplicitAll                                samples       `json:"implicitAll"`
	CPUImplicit, CPUKube                       time.Duration `json:",omitempty"`
	EventsDelivered                            float64       `json:"eventsDelivered"`
	Reconnects                                 int64         `json:"reconnects"`
	// Native is, round by round with Implicit (the same edits), the time to
	// the last of NativeWatchers native watchers of the source RoleBinding
	// in kube-apiserver's watch cache.
	Native           samples `json:"native,omitempty"`
	NativeWatchers   int     `json:"nativeWatchers,omitempty"`
	NativeReconnects int64   `json:"nativeReconnects,omitempty"`
	// Staged and Promotion are issue 19's staged change of global-0 on the
	// same view fleet: a candidate reaching every tenant, and its promotion.
	Staged    samples `json:"staged,omitempty"`
	Promotion samples `json:"promotion,omitempty"`
}

type slowResult struct {
	Edits           int     `json:"edits"`
	Closed          float64 `json:"closed"`
	Rounds          samples `json:"rounds"`
	FleetReconnects int64   `json:"fleetReconnects"`
}

type copyResult struct {
	ViewWhoSees                       samples       `json:"viewWhoSees"`
	ViewWhoSeesItems                  int           `json:"viewWhoSeesItems"`
	NativeAll                         samples       `json:"nativeAll"`
	NativeAllItems                    int           `json:"nativeAllItems"`
	Create                            time.Duration `json:"create"`
	MemBefore, MemCopies, MemWatchers memPair       `json:",omitempty"`
	Unthrottled, QPS50                samples       `json:",omitempty"`
	CPUKube, CPUEtcd                  time.Duration `json:",omitempty"`
	EventsDelivered                   float64       `json:"eventsDelivered"`
}

// speedRatio is a over b as "1.23x" ("–" when b is 0).
func speedRatio(a, b float64) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// materializeResult is one global NetworkPolicy materialized into Copies
// namespaces (tenants, orgs and default): the time to the last copy of its creation
// and of each edit, on a native -A watch of the copies.
type materializeResult struct {
	QPS    float64       `json:"qps"` // implicit-apiserver's --materialize-qps
	Burst  int           `json:"burst"`
	Copies int           `json:"copies"`
	Create time.Duration `json:"create"`
	Edits  samples       `json:"edits"`
	// CreateWrites and EditWrites are implicit_materialize_writes_total's
	// increase over the creation and over all the edits.
	CreateWrites float64 `json:"createWrites"`
	EditWrites   float64 `json:"editWrites"`
	// LagMean is implicit_materialize_lag_seconds' mean over the edits
	// (LagObserved namespaces): a namespace's view change to its last copy.
	LagMean     time.Duration `json:"lagMean"`
	LagObserved float64       `json:"lagObserved"`
	// Pending is implicit_materialize_pending_namespaces after the edits.
	Pending                       float64       `json:"pending"`
	CPUImplicit, CPUKube, CPUEtcd time.Duration `json:",omitempty"`
	Reconnects                    int64         `json:"reconnects"`
	// SameKindCreate and SameKind time the client copier of the same kind
	// (-same-kind-copy-runs): its creation of one NetworkPolicy per copy's
	// namespace and its label patches of them; SameKindWrites are its
	// patches, over which the CPU was read.
	SameKindCreate                                        time.Duration `json:"sameKindCreate,omitempty"`
	SameKind                                              samples       `json:"sameKind,omitempty"`
	SameKindWrites                                        float64       `json:"sameKindWrites,omitempty"`
	SameKindCPUImplicit, SameKindCPUKube, SameKindCPUEtcd time.Duration `json:",omitempty"`
}

type authzResult struct {
	Native, Inherited, NoGrant samples `json:",omitempty"`
}

// write saves results.json and results.md under the output directory and
// prints the Markdown.
func (r *results) write(o options) error {
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.outDir, "results.json"), js, 0o644); err != nil {
		return err
	}
	var md strings.Builder
	r.markdown(&md)
	fmt.Print("\n", md.String())
	return os.WriteFile(filepath.Join(o.outDir, "results.md"), []byte(md.String()), 0o644)
}

func (r *results) markdown(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	mp := func(s samples) string {
		if len(s) == 0 {
			return "– | –"
		}
		return dur(s.median()) + " | " + dur(s.p99())
	}
	if len(r.Switch) > 0 {
		p("Machine: %s. Wall time %s. Command: `%s`.", r.Machine, r.Wall.Round(time.Second), r.Command)
		r.switchMarkdown(p)
		return
	}
	p("Machine: %s. Sweep wall time %s. Command: `%s`.", r.Machine, r.Wall.Round(time.Second), r.Command)
	p("Medians and p99 (nearest rank; with fewer than 100 runs p99 is the slowest run). Run counts in results.json.")
	p("")
	// -fanout-only measures neither reads, copies, capacity nor reviews.
	if !slices.ContainsFunc(r.Ns, func(n *nResult) bool { return len(n.Copy.Unthrottled) > 0 }) {
		r.fanoutMarkdown(p, mp)
		return
	}
	p("### Propagation of one global edit")
	p("")
	p("| N | G | implicit: last namespace watcher, median | p99 | implicit: -A watcher has all N, median | p99 | copy unthrottled (%d workers), median | p99 | copy at QPS 50, median | p99 | copy unthrottled / implicit | copy QPS 50 / implicit |", copyWorkers)
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range r.Ns {
		for _, g := range n.G {
			p("| %d | %d | %s | %s | %s | %s | %s | %s |", n.N, g.G, mp(g.Implicit), mp(g.ImplicitAll), mp(n.Copy.Unthrottled), mp(n.Copy.QPS50),
				ratio(n.Copy.Unthrottled.median(), slowest(g.Implicit.median(), g.ImplicitAll.median())),
				ratio(n.Copy.QPS50.median(), slowest(g.Implicit.median(), g.ImplicitAll.median())))
		}
	}
	p("")
	p("Ratios compare the copy's median (every native watcher, -A included) with the implicit median of the slower of the last namespace watcher and the -A watcher.")
	p("")
	r.materializeMarkdown(p, mp)
	r.policiesMarkdown(p, mp)
	r.promotionMarkdown(p, mp)
	r.fanoutMarkdown(p, mp)
	p("### Reads")
	p("")
	p("| N | G | view, one namespace (items) median | p99 | native, one namespace (items) median | p99 | view / native | view straight from implicit-apiserver, median | p99 | view -A (items) median | p99 | view -A per item |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range r.Ns {
		for _, g := range n.G {
			all, per := "not fetched (too large) | –", "–"
			if len(g.ViewAll) > 0 {
				all = fmt.Sprintf("%s (%d) | %s", dur(g.ViewAll.median()), g.ViewAllItems, dur(g.ViewAll.p99()))
				per = fmt.Sprintf("%.1f µs", float64(g.ViewAll.median())/float64(time.Microsecond)/float64(max(1, g.ViewAllItems)))
			}
			p("| %d | %d | %s (%d) | %s | %s (%d) | %s | %s | %s | %s | %s |", n.N, g.G, dur(g.ViewOne.median()), g.ViewOneItems, dur(g.ViewOne.p99()),
				dur(g.NativeOne.median()), g.NativeOneItems, dur(g.NativeOne.p99()), ratio(g.ViewOne.median(), g.NativeOne.median()), mp(g.ViewOneDirect), all, per)
		}
	}
	p("")
	p("| N | view -A of one name, who sees global-0 (items) median | p99 | native -A list with the N copies (items) median | p99 | view / native | native per item |")
	p("|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range r.Ns {
		c := n.Copy
		p("| %d | %s (%d) | %s | %s (%d) | %s | %s | %.1f µs |", n.N, dur(c.ViewWhoSees.median()), c.ViewWhoSeesItems, dur(c.ViewWhoSees.p99()),
			dur(c.NativeAll.median()), c.NativeAllItems, dur(c.NativeAll.p99()), ratio(c.ViewWhoSees.median(), c.NativeAll.median()),
			float64(c.NativeAll.median())/float64(time.Microsecond)/float64(max(1, c.NativeAllItems)))
	}
	p("")
	p("### Memory (live heap after a forced GC; RSS from /proc)")
	p("")
	p("| N | G | implicit-apiserver RSS | live heap | with N+1 view watchers: RSS | live heap | heap per watcher | kube-apiserver RSS | live heap | kube-apiserver with the view watchers (proxying): RSS | live heap |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range r.Ns {
		for _, g := range n.G {
			p("| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |", n.N, g.G, mib(g.Mem.Implicit.RSS), mib(g.Mem.Implicit.HeapLive),
				mib(g.MemWatchers.Implicit.RSS), mib(g.MemWatchers.Implicit.HeapLive), perWatcher(g.MemWatchers.Implicit.HeapLive-g.Mem.Implicit.HeapLive, g.Watchers),
				mib(g.Mem.Kube.RSS), mib(g.Mem.Kube.HeapLive), mib(g.MemWatchers.Kube.RSS), mib(g.MemWatchers.Kube.HeapLive))
		}
	}
	p("")
	if len(r.Ns) > 1 {
		for gi := range r.Ns[0].G {
			var xs, ys []float64
			for _, n := range r.Ns {
				if gi < len(n.G) {
					xs, ys = append(xs, float64(n.N)), append(ys, n.G[gi].Mem.Implicit.HeapLive)
				}
			}
			a, b, r2 := linearFit(xs, ys)
			p("Fit of implicit-apiserver's live heap without watchers at G=%d: %s + %.0f bytes per tenant namespace × N (R² = %.4f).", r.Ns[0].G[gi].G, mib(a), b, r2)
		}
		p("")
	}
	if g := r.Ns[0].G; len(g) > 1 {
		p("| N | live heap, G=%d | G=%d | growth per added global (bytes) | per added global and namespace |", g[0].G, g[len(g)-1].G)
		p("|---:|---:|---:|---:|---:|")
		for _, n := range r.Ns {
			lo, hi := n.G[0], n.G[len(n.G)-1]
			d := (hi.Mem.Implicit.HeapLive - lo.Mem.Implicit.HeapLive) / float64(hi.G-lo.G)
			p("| %d | %s | %s | %.0f | %.1f |", n.N, mib(lo.Mem.Implicit.HeapLive), mib(hi.Mem.Implicit.HeapLive), d, d/float64(n.N))
		}
		p("")
	}
	p("| N | kube-apiserver live heap before the copies | with N copies | per copy | with N+1 native watchers | per native watcher | copies created in |")
	p("|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range r.Ns {
		c := n.Copy
		p("| %d | %s | %s | %.0f B | %s | %s | %s |", n.N, mib(c.MemBefore.Kube.HeapLive), mib(c.MemCopies.Kube.HeapLive),
			(c.MemCopies.Kube.HeapLive-c.MemBefore.Kube.HeapLive)/float64(n.N), mib(c.MemWatchers.Kube.HeapLive),
			perWatcher(c.MemWatchers.Kube.HeapLive-c.MemCopies.Kube.HeapLive, n.N+1), dur(c.Create))
	}
	p("")
	p("### Watch capacity and CPU per delivered event")
	p("")
	p("| N | G | open view watchers | implicit-apiserver per watcher: live heap | stacks | goroutines | RSS | kube-apiserver (proxy) heap per watcher | implicit-apiserver CPU per delivered event | kube-apiserver (proxy) CPU per event | fleet reconnects |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range r.Ns {
		for gi, g := range n.G {
			with, without := g.MemWatchers.Implicit, g.Mem.Implicit
			rss := perWatcher(with.RSS-without.RSS, g.Watchers)
			if gi > 0 {
				rss = "– (RSS kept from the G=" + fmt.Sprint(n.G[0].G) + " watchers)"
			}
			p("| %d | %d | %d | %s | %s | %.1f | %s | %s | %s | %s | %d |", n.N, g.G, g.Watchers, perWatcher(with.HeapLive-without.HeapLive, g.Watchers),
				perWatcher(with.Stacks-without.Stacks, g.Watchers), (with.Goroutines-without.Goroutines)/float64(max(1, g.Watchers)),
				rss, perWatcher(g.MemWatchers.Kube.HeapLive-g.Mem.Kube.HeapLive, g.Watchers),
				perEvent(g.CPUImplicit, g.EventsDelivered), perEvent(g.CPUKube, g.EventsDelivered), g.Reconnects)
		}
	}
	p("")
	p("| N | never-reading -A watcher closed as slow | after edits | fleet's slowest watcher during those edits, median | p99 | fleet reconnects | copy: kube-apiserver + etcd CPU per native event delivered |")
	p("|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range r.Ns {
		p("| %d | %.0f | %d | %s | %d | %s |", n.N, n.Slow.Closed, n.Slow.Edits, mp(n.Slow.Rounds), n.Slow.FleetReconnects, perEvent(n.Copy.CPUKube+n.Copy.CPUEtcd, n.Copy.EventsDelivered))
	}
	p("")
	p("### SubjectAccessReview through kube-apiserver")
	p("")
	p("| N | native RBAC grant (webhook not asked), median | p99 | inherited grant (webhook), median | p99 | no grant (webhook, no opinion), median | p99 | webhook adds (median) |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range r.Ns {
		a := n.Authz
		p("| %d | %s | %s | %s | %s |", n.N, mp(a.Native), mp(a.Inherited), mp(a.NoGrant), dur(a.Inherited.median()-a.Native.median()))
	}
	p("")
	p("| N | setup (control plane, namespaces, first globals) | whole N |")
	p("|---:|---:|---:|")
	for _, n := range r.Ns {
		p("| %d | %s | %s |", n.N, n.SetupTime.Round(time.Second), n.Total.Round(time.Second))
	}
}

// replotFrom draws the plot of a results.json.
func replotFrom(path, plotPath string) error {
	js, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var r results
	if err := json.Unmarshal(js, &r); err != nil {
		return err
	}
	if err := r.plot(plotPath); err != nil {
		return err
	}
	return r.plotOpens(opensPath(plotPath))
}

func slowest(a, b time.Duration) time.Duration { return max(a, b) }

func perWatcher(bytes float64, watchers int) string {
	if watchers == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f KiB", bytes/float64(watchers)/1024)
}

// materializeMarkdown writes the materialization tables, beside the copy
// baseline, when any N measured it.
func (r *results) materializeMarkdown(p func(string, ...any), mp func(samples) string) {
	var ns []*nResult
	for _, n := range r.Ns {
		if n.Materialize != nil {
			ns = append(ns, n)
		}
	}
	if len(ns) == 0 {
		return
	}
	p("### Materialization of one global edit (networkpolicies, delivery: Materialize)")
	p("")
	p("| N | copies (tenants + orgs + default) | --materialize-qps (burst) | edit: last copy, median | p99 | writes/s (median) | copies / QPS | copies / 50 (server default) | create: last copy | writes/s | copy unthrottled (%d workers), median | its writes/s | materialized / copier writes/s | copy at QPS 50, median | implicit view: last namespace watcher, median | rounds |", copyWorkers)
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range ns {
		m := n.Materialize
		copier := perSecond(n.N, n.Copy.Unthrottled.median())
		view := "–"
		if len(n.G) > 0 {
			view = dur(n.G[0].Implicit.median())
		}
		p("| %d | %d | %g (%d) | %s | %.0f | %s | %s | %s | %.0f | %s | %.0f | %s | %s | %s | %d |", n.N, m.Copies, m.QPS, m.Burst, mp(m.Edits), perSecond(m.Copies, m.Edits.median()),
			dur(floorAt(m.Copies, m.QPS)), dur(floorAt(m.Copies, serverDefaultMaterializeQPS)), dur(m.Create), perSecond(m.Copies, m.Create),
			dur(n.Copy.Unthrottled.median()), copier, speedRatio(perSecond(m.Copies, m.Edits.median()), copier), dur(n.Copy.QPS50.median()), view, len(m.Edits))
	}
	p("")
	p("Each edit is one label patch of the global NetworkPolicy %s in %s, timed until one native -A watch of the copies (labelSelector %s=true) has, for every namespace that inherits (the tenants, their orgs and default), an ADDED or MODIFIED of its copy carrying the edit's label; the create is the policy's creation, timed the same way (a new copy costs one create, an edited one one update, each through the materializer's rate limit). Writes/s are copies over that time; the copier's are its N copies over its median, and materialized / copier above 1.00x means the materializer wrote faster. Both write as the same user (the bench's admin, system:masters: API Priority and Fairness's exempt level), on the same control plane, in the same run. copies / QPS is the rate limiter's pace at the QPS used, its burst aside; copies / 50 the same at the server's default --materialize-qps (HNC's rate). The copy baseline is the RoleBinding copies of the table above (N tenant copies written by the client); the view column is the G=%d view propagation of the first table.", matPolicy, globalNS, v1alpha1.LabelMaterialized, firstG(ns))
	p("")
	p("| N | writes per edit (implicit_materialize_writes_total) | per copy | create writes | mean namespace lag over the edits (implicit_materialize_lag_seconds) | pending after | implicit-apiserver CPU per write | kube-apiserver | etcd | copy watch reconnects |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range ns {
		m := n.Materialize
		per := m.EditWrites / float64(max(1, len(m.Edits)))
		p("| %d | %.0f | %.2f | %.0f | %s | %.0f | %s | %s | %s | %d |", n.N, per, per/float64(max(1, m.Copies)), m.CreateWrites, dur(m.LagMean), m.Pending,
			perEvent(m.CPUImplicit, m.EditWrites), perEvent(m.CPUKube, m.EditWrites), perEvent(m.CPUEtcd, m.EditWrites), m.Reconnects)
	}
	p("")
	var same []*nResult
	for _, n := range ns {
		if len(n.Materialize.SameKind) > 0 {
			same = append(same, n)
		}
	}
	if len(same) == 0 {
		return
	}
	p("| N | same-kind copier (%d workers): patches, last copy, median | p99 | its writes/s | materialized / same-kind copier | by the means of every round | its create | writes/s | materialized create / its create | CPU per patch: kube-apiserver | etcd | implicit-apiserver | rounds |", copyWorkers)
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range same {
		m := n.Materialize
		copier := perSecond(m.Copies, m.SameKind.median())
		p("| %d | %s | %.0f | %s | %s | %s | %.0f | %s | %s | %s | %s | %d |", n.N, mp(m.SameKind), copier, speedRatio(perSecond(m.Copies, m.Edits.median()), copier),
			speedRatio(perSecond(m.Copies, m.Edits.mean()), perSecond(m.Copies, m.SameKind.mean())),
			dur(m.SameKindCreate), perSecond(m.Copies, m.SameKindCreate), speedRatio(perSecond(m.Copies, m.Create), perSecond(m.Copies, m.SameKindCreate)),
			perEvent(m.SameKindCPUKube, m.SameKindWrites), perEvent(m.SameKindCPUEtcd, m.SameKindWrites), perEvent(m.SameKindCPUImplicit, m.SameKindWrites), len(m.SameKind))
	}
	p("")
	p("The same-kind copier writes the materializer's kind to the same namespaces (the tenants, their orgs and default): %d workers create one NetworkPolicy %s in each, then merge-patch a label of each, as the bench's admin (the materializer's host client's user), timed by one native -A watch of them (labelSelector %s=true) as the copies are. Its objects are the tenants' own, so implicit-apiserver's views of those namespaces follow each write (as with the RoleBinding copier); its CPU is read over the patches.", copyWorkers, sameKindCopy, sameKindLabel)
	p("")
}

func firstG(ns []*nResult) int {
	if len(ns[0].G) == 0 {
		return 0
	}
	return ns[0].G[0].G
}

// fanoutMarkdown writes the fan-out tables: both fleets open at once, and
// each fleet alone beside the aggregated-path reference.
func (r *results) fanoutMarkdown(p func(string, ...any), mp func(samples) string) {
	p("### Fan-out of one edit: views against kube-apiserver's watch cache")
	p("")
	p("| N | G | view watchers | views: last watcher, median | p99 | native watchers | native watch cache: last watcher, median | p99 | views / native, median | p99 | rounds |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range r.Ns {
		for _, g := range n.G {
			if len(g.Native) == 0 {
				continue
			}
			p("| %d | %d | %d | %s | %d | %s | %s | %s | %d |", n.N, g.G, n.N, mp(g.Implicit), g.NativeWatchers, mp(g.Native),
				ratio(g.Implicit.median(), g.Native.median()), ratio(g.Implicit.p99(), g.Native.p99()), len(g.Native))
		}
	}
	p("")
	p("Each round is one label edit of the source RoleBinding (global-0), timed on both fleets: one view watch per tenant namespace on rolebindings.implicit.dev through the aggregator, and as many watches of that RoleBinding in the global namespace (fieldSelector metadata.name) served by kube-apiserver's watch cache, over as many client connections. Both opened informer-style (one list, then every watch from its resourceVersion), both decoded the same minimal way (type, name, namespace, resourceVersion, the bench label, subjects), after one unrecorded warm-up edit. The -A view watcher is not in this table.")
	p("")
	r.aloneMarkdown(p, mp)
}
