package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	binDir, binary  string
	namespaces      []int
	globals         []int
	runs            int // implicit propagation rounds per (N, G)
	copyRuns        int // unthrottled copy rounds per N
	slowCopyRuns    int // QPS 50 copy rounds per N
	materializeRuns int // materialized edit rounds per N (0: no materialized kind)
	promotionRuns   int // staged changes of global-0 promoted per N (0: none)
	policyRuns      int // edits of an admission policy's global parameter per N (0: none)
	materializeQPS  float64
	// sameKindCopyRuns are the label patch rounds of the copier of the
	// materialized kind (0: not measured).
	sameKindCopyRuns int
	listRuns         int
	authzRequests    int
	maxListAll       int // largest -A view list (items) fetched
	short            bool
	timeout          time.Duration
	keepWorkDir      bool
	viewAll          bool // an -A view watcher beside the namespace watchers
	watchersPerConn  int
	outDir           string
	plotPath         string
	implicitArgs     []string
	// The fan-out with each fleet alone (alone.go).
	aloneRuns, aloneRepeats int
	reference               bool // sample-apiserver as the aggregated-path reference
	fanoutOnly              bool
	openProfile             int // seconds of CPU profile from the first opening of each fleet alone
	watchUser               string
	roundsProfile           int
	aloneFleets             []string
	concurrent              bool
	// burst: each fleet alone also opened as a reconnect storm opens it,
	// burstPerConn watchers on each client connection (burst.go).
	burst        bool
	burstPerConn int

	// The guard flood (guardflood.go) instead of the sweep.
	guardFlood       bool
	floodLoops       int
	floodLocked      int
	floodSamples     int
	floodMax         int
	floodCaseTimeout time.Duration

	// The replica switch (replicaswitch.go) instead of the sweep.
	replicaSwitch bool
	// exceptionsExpire: issue 42's burst of exceptions ending together (exceptions.go).
	exceptionsExpire bool
	exceptions       int
	switchFleet      int
	switchScopes     []string
	switchProfile    int

	// edges: issue 45's open storm and shutdown (edges.go) instead of the sweep.
	edges       bool
	stormOpens  int
	stormDirect bool
	stopTimeout time.Duration
	// Issue 45's lists that stream (listrss.go) instead of the sweep.
	listRSS       bool
	listBefore    string
	listPagesTime time.Duration
	listCases     []string
	// Issue 45's kubectl explain after a served-group change (explain.go)
	// instead of the sweep.
	explain        bool
	explainRuns    int
	explainBefore  string
	explainTouch   bool
	explainTimeout time.Duration
	kubectl        string
}

func main() {
	var o options
	var namespaces, globals, implicitArgs, replot, aloneFleets, switchScopes string
	flag.StringVar(&o.binDir, "bin-dir", os.Getenv("IMPLICIT_TOOLS_BIN"), "directory of etcd, kube-apiserver, kube-controller-manager (what hack/build-tools.sh prints)")
	flag.StringVar(&o.binary, "implicit-binary", os.Getenv("IMPLICIT_BINARY"), "implicit-apiserver binary")
	flag.StringVar(&namespaces, "namespaces", "1000,5000,10000", "tenant namespaces N, comma-separated: one control plane each (plus N/100 orgs)")
	flag.StringVar(&globals, "globals", "10,100", "global RoleBindings G, comma-separated, ascending: added on the same control plane")
	flag.IntVar(&o.runs, "runs", 10, "implicit propagation rounds per N and G")
	flag.IntVar(&o.copyRuns, "copy-runs", 5, "unthrottled copy rounds per N")
	flag.IntVar(&o.slowCopyRuns, "qps50-runs", 1, "copy rounds at QPS 50 per N (N/50 s each)")
	flag.IntVar(&o.promotionRuns, "promotion-runs", 3, "staged changes of global-0 per N (issue 19): a candidate reaching every tenant, then its promotion, timed on the view watchers (0: none)")
	flag.IntVar(&o.materializeRuns, "materialize-runs", 3, "edits of a materialized global NetworkPolicy per N, after its creation (0: networkpolicies are not materialized)")
	flag.IntVar(&o.sameKindCopyRuns, "same-kind-copy-runs", 3, "with -materialize-runs: label patch rounds of a 32-worker client copier of the materialized kind (one NetworkPolicy of its own in each namespace that inherits, created first and timed too), beside the materializer's edits (0: not measured)")
	flag.Float64Var(&o.materializeQPS, "materialize-qps", 2000, "implicit-apiserver's --materialize-qps (and --materialize-burst, rounded up): high enough to time the materializer rather than its rate limit (the server's default is 50)")
	flag.IntVar(&o.policyRuns, "policy-runs", 3, "edits of the global parameter of an admission policy whose paramKind is a view (ConfigMaps), timed until enforced in every namespace (0: ConfigMaps are not served)")
	flag.IntVar(&o.listRuns, "list-runs", 20, "repetitions of each list")
	flag.IntVar(&o.authzRequests, "authz-requests", 200, "SubjectAccessReviews per case")
	flag.IntVar(&o.maxListAll, "max-list-all", 200_000, "skip -A view lists of more items than this")
	flag.BoolVar(&o.short, "short", false, "a quick look: N=200, G=10,100, 3 rounds (flags given explicitly win)")
	flag.DurationVar(&o.timeout, "timeout", 40*time.Minute, "deadline of the whole run")
	flag.BoolVar(&o.keepWorkDir, "keep", false, "keep the control planes' work directories (logs) after a successful run")
	flag.BoolVar(&o.viewAll, "view-all", true, "open one -A view watcher beside the N namespace view watchers (it doubles the events the views deliver per edit); -view-all=false compares exactly N view watchers with N native ones (issue 15's comparison)")
	flag.IntVar(&o.watchersPerConn, "watchers-per-client", 200, "watchers sharing one rest client (one HTTP/2 connection)")
	flag.StringVar(&o.outDir, "out", "_output/bench", "directory of results.json, results.md and the profiles")
	flag.StringVar(&o.plotPath, "plot", "", "PNG plot of propagation time against N (default <out>/bench-propagation.png)")
	flag.StringVar(&implicitArgs, "implicit-args", "", "extra implicit-apiserver flags, space-separated (e.g. --http2-max-streams-per-connection=20)")
	flag.IntVar(&o.aloneRuns, "alone-runs", 10, "timed edits per fleet and repetition with each fleet alone (views, native, reference), after one unrecorded edit")
	flag.IntVar(&o.aloneRepeats, "alone-repeats", 3, "interleaved repetitions of the fleets alone: views, native, reference, views, ... (0: not measured)")
	flag.BoolVar(&o.reference, "reference", true, "start k8s.io/sample-apiserver (hack/build-tools.sh sample-apiserver, in -bin-dir) behind the same aggregator and time the fan-out of a Flunder edit alone: the aggregated-path reference")
	flag.BoolVar(&o.fanoutOnly, "fanout-only", false, "per N, only the fan-out: the concurrent rounds (-runs, no promotion, slow watcher, authz, copies, materialization) and the fleets alone")
	flag.IntVar(&o.openProfile, "open-profile", 10, "seconds of CPU profiles of kube-apiserver and the server behind it from the start of the first opening of each fleet alone (0: none)")
	flag.StringVar(&o.watchUser, "watch-user", "bench-watcher", "the user of the fleets alone, granted reads of the three fleets' resources in every namespace by a ClusterRoleBinding (\"\": admin, system:masters, whom every authorizer allows without a review)")
	flag.IntVar(&o.roundsProfile, "rounds-profile", 10, "seconds of CPU profiles of kube-apiserver and the server behind it from the first timed edit of each fleet alone, and of kube-apiserver and implicit-apiserver from the first materialized edit (0: none)")
	flag.StringVar(&aloneFleets, "alone-fleets", "views,native,reference", "the fleets measured alone, in this order in each repetition")
	flag.BoolVar(&o.concurrent, "concurrent", true, "-fanout-only: also the concurrent rounds (both fleets open at once); false: only the fleets alone")
	flag.BoolVar(&o.burst, "burst", false, "each fleet alone is also opened as a reconnect storm opens it, right after its gentle opening in each repetition: every watcher at once, each a list of its path then a watch from that list's version, -burst-per-client on each client connection (up before the burst), a 429 sent again after its Retry-After; then its fan-out timed as the gentle one's; both printed side by side")
	flag.IntVar(&o.burstPerConn, "burst-per-client", 200, "-burst: watchers opening at once on each client connection")
	flag.StringVar(&replot, "replot", "", "only redraw the plot (-plot) from this results.json")
	flag.DurationVar(&roundTimeout, "round-timeout", roundTimeout, "deadline of one propagation round (plus N/50 s for the QPS 50 copy and for each materialization round)")
	flag.BoolVar(&o.guardFlood, "guard-flood", false, "instead of the sweep: one tenant floods the parents guard with refused opt-outs "+
		"(issue 24 item 7) while another changes a namespace's parent; reports that latency with and without the flood, and whether the materializer kept its Lease")
	flag.IntVar(&o.floodLoops, "flood-loops", 10, "-guard-flood: parallel loops of the flooding tenant")
	flag.IntVar(&o.floodLocked, "flood-locked", 20, "-guard-flood: locked global items (each one unlock access review per refused opt-out)")
	flag.IntVar(&o.floodSamples, "flood-samples", 100, "-guard-flood: the other tenant's parent changes per case, one after the other")
	flag.IntVar(&o.floodMax, "flood-max", 20000, "-guard-flood: most requests of the flood per case")
	flag.DurationVar(&o.floodCaseTimeout, "flood-case-timeout", 3*time.Minute, "-guard-flood: most time of one case's parent changes")
	flag.BoolVar(&o.replicaSwitch, "replica-switch", false, "instead of the sweep (issue 31): at each -namespaces (default 10000) and the last -globals (default 100), "+
		"clients of each -switch-scopes list and watch, implicit-apiserver is restarted (a new process, no history) with writes while it is down, "+
		"and the clients resume from their last versions; against the same scope relisted: time, bytes, events, the servers' CPU and memory, and the watch history's size")
	flag.IntVar(&o.switchFleet, "switch-fleet", 0, "-replica-switch: one-namespace clients, one per tenant from the first (0: every tenant)")
	flag.StringVar(&switchScopes, "switch-scopes", "one,all", "-replica-switch: the scopes measured, each on its own restart, in this order: one (the -switch-fleet one-namespace clients), all (one -A client)")
	flag.IntVar(&o.switchProfile, "switch-profile", 0, "-replica-switch: seconds of CPU profiles of implicit-apiserver and kube-apiserver from the start of each resume and relist, and implicit-apiserver's heap profile after each (0: none)")
	flag.BoolVar(&o.exceptionsExpire, "exceptions-expire", false, "instead of the sweep (issue 42): -namespaces tenants (the first value, default 10000), -exceptions of them with an exception of one global RoleBinding, all ending in the same second; the time until every excepted view has it back, and the watch events")
	flag.IntVar(&o.exceptions, "exceptions", 1000, "-exceptions-expire: the excepted namespaces")
	var fo fleetOptions
	var fleet bool
	flag.BoolVar(&fleet, "fleet", false, "instead of the sweep (issue 44): a hub, -fleet-real member implicit-apiservers and -fleet-simulated simulated members (their informers and reports); "+
		"the hub kube-apiserver's CPU and watches, a hub edit's time to the last member, and after a -fleet-outage hub outage the time until every member serves the hub's next edit, with the LISTs it cost")
	flag.IntVar(&fo.real, "fleet-real", 3, "-fleet: real member implicit-apiservers (one member control plane)")
	flag.IntVar(&fo.simulated, "fleet-simulated", 100, "-fleet: simulated members")
	flag.IntVar(&fo.tenants, "fleet-tenants", 200, "-fleet: tenant namespaces of the member control plane")
	flag.IntVar(&fo.globals, "fleet-globals", 20, "-fleet: global RoleBindings on the hub")
	flag.IntVar(&fo.rounds, "fleet-rounds", 10, "-fleet: hub edits timed")
	flag.DurationVar(&fo.outage, "fleet-outage", 5*time.Minute, "-fleet: how long the hub's kube-apiserver is down (0: no outage)")
	flag.DurationVar(&fo.idle, "fleet-idle", time.Minute, "-fleet: the quiet time the hub's idle CPU is measured over, alone and with the fleet")
	flag.BoolVar(&o.edges, "edges", false, "instead of the sweep (issue 45): on -namespaces tenants (default 100), -storm-opens view watches opened at once while the APIService's Available condition and discovery are polled every 200 ms, then SIGTERM to implicit-apiserver with them open: its exit time and how each watch ended")
	flag.IntVar(&o.stormOpens, "storm-opens", 10000, "-edges: the watches opened at once")
	flag.BoolVar(&o.stormDirect, "storm-direct", false, "-edges: open the watches straight on implicit-apiserver's port as admin, not through kube-apiserver (the server's part alone)")
	flag.DurationVar(&o.stopTimeout, "stop-timeout", 0, "how long implicit-apiserver has after SIGTERM before it is killed (0: internal/controlplane's 15 s; -edges: 2m)")
	flag.BoolVar(&o.listRSS, "list-rss", false, "instead of the sweep (issue 45): at the first -namespaces (default 10000) and the last -globals (default 100), implicit-apiserver's peak RSS for one -A list, ten at once, and kubectl's Table pages of 500, each on a new process, for -list-before (if set) and then -implicit-binary")
	flag.StringVar(&o.listBefore, "list-before", "", "-list-rss: the implicit-apiserver binary measured first (e.g. main's build)")
	var listCases string
	flag.StringVar(&listCases, "list-cases", "list,lists10,pages", "-list-rss: the cases, in this order: list, lists10, pages, watchlist, watchlists10 (ten-client cases are skipped for -list-before)")
	flag.DurationVar(&o.listPagesTime, "list-pages-time", 2*time.Minute, "-list-rss: the most time kubectl's pages are read for")
	flag.BoolVar(&o.explain, "explain", false, "instead of the sweep (issue 45): implicit-apiserver behind the aggregator gains a configured kind (its CRD created), then the kind's schema changes (a field added), -explain-runs times; after each change, how long until real kubectl explain shows it, with a new --cache-dir each try and with a warm one, beside when the view is served and when the aggregator's discovery and OpenAPI have it")
	flag.IntVar(&o.explainRuns, "explain-runs", 2, "-explain: served-group changes (one new kind each) per binary")
	flag.StringVar(&o.explainBefore, "explain-before", "", "-explain: an implicit-apiserver binary measured the same way first, on a control plane of its own (e.g. a build from before servedgroup.RevalidateOpenAPI: the previous figure)")
	flag.BoolVar(&o.explainTouch, "explain-touch", false, "-explain: annotate the APIService once the new view is served (kube-aggregator then refetches its discovery at once)")
	flag.DurationVar(&o.explainTimeout, "explain-timeout", 75*time.Second, "-explain: the most time one change is timed for (the aggregator refetches every minute)")
	flag.StringVar(&o.kubectl, "kubectl", "", "-explain: the kubectl binary (default: kubectl in -bin-dir if there, else on PATH)")
	flag.Parse()
	o.listCases = strings.Split(listCases, ",")
	if o.short {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		defaults := map[string]func(){
			"namespaces":     func() { namespaces = "200" },
			"runs":           func() { o.runs = 3 },
			"copy-runs":      func() { o.copyRuns = 2 },
			"list-runs":      func() { o.listRuns = 5 },
			"authz-requests": func() { o.authzRequests = 50 },
		}
		for name, set1 := range defaults {
			if !set[name] {
				set1()
			}
		}
	}
	if replot != "" {
		if err := replotFrom(replot, o.plotPath); err != nil {
			fail(1, "replot: %v", err)
		}
		return
	}
	if o.guardFlood {
		if o.binDir == "" || o.binary == "" {
			fail(2, "bench needs -bin-dir (or IMPLICIT_TOOLS_BIN) and -implicit-binary (or IMPLICIT_BINARY)")
		}
		if o.floodLoops < 1 || o.floodLocked < 1 || o.floodSamples < 1 || o.floodMax < 1 {
			fail(2, "-flood-loops, -flood-locked, -flood-samples and -flood-max must be positive")
		}
		o.implicitArgs = strings.Fields(implicitArgs)
		if err := os.MkdirAll(o.outDir, 0o755); err != nil {
			fail(1, "%v", err)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		ctx, cancel := context.WithTimeout(ctx, o.timeout)
		err := guardFlood(ctx, o)
		cancel()
		stop()
		if err != nil {
			fail(1, "guard flood: %v", err)
		}
		return
	}
	if fleet {
		if o.binDir == "" || o.binary == "" {
			fail(2, "bench needs -bin-dir (or IMPLICIT_TOOLS_BIN) and -implicit-binary (or IMPLICIT_BINARY)")
		}
		if fo.real < 1 || fo.simulated < 0 || fo.tenants < 1 || fo.globals < 1 || fo.rounds < 1 {
			fail(2, "-fleet: -fleet-real, -fleet-tenants, -fleet-globals and -fleet-rounds must be positive, -fleet-simulated at least 0")
		}
		o.implicitArgs = strings.Fields(implicitArgs)
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		ctx, cancel := context.WithTimeout(ctx, o.timeout)
		err := fleetBench(ctx, o, fo)
		cancel()
		stop()
		if err != nil {
			fail(1, "fleet: %v", err)
		}
		return
	}
	if o.exceptionsExpire {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["namespaces"] {
			namespaces = "10000"
		}
		ns, err := ints(namespaces)
		if err != nil || o.exceptions < 1 || o.exceptions > ns[0] {
			fail(2, "-exceptions-expire: -namespaces and -exceptions (1 to the namespaces) must be positive (%v)", err)
		}
		if o.binDir == "" || o.binary == "" {
			fail(2, "bench needs -bin-dir (or IMPLICIT_TOOLS_BIN) and -implicit-binary (or IMPLICIT_BINARY)")
		}
		o.implicitArgs = strings.Fields(implicitArgs)
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		ctx, cancel := context.WithTimeout(ctx, o.timeout)
		err = exceptionsExpire(ctx, o, ns[0], o.exceptions)
		cancel()
		stop()
		if err != nil {
			fail(1, "exceptions: %v", err)
		}
		return
	}
	if o.edges {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["namespaces"] {
			namespaces = "100"
		}
		if !set["globals"] {
			globals = "10"
		}
		if !set["stop-timeout"] {
			o.stopTimeout = 2 * time.Minute
		}
		if !set["watchers-per-client"] {
			// kube-apiserver's streams per connection: more would make the
			// clients dial (a TLS handshake each) in the storm.
			o.watchersPerConn = 100
		}
		o.materializeRuns, o.policyRuns = 0, 0
		if o.stormOpens < 1 {
			fail(2, "-storm-opens must be positive")
		}
	}
	if o.explain {
		// A plain server but for the probe kinds (explain.go).
		o.materializeRuns, o.policyRuns = 0, 0
		if o.explainRuns < 1 || o.explainTimeout <= 0 {
			fail(2, "-explain-runs and -explain-timeout must be positive")
		}
		if o.kubectl == "" {
			o.kubectl = "kubectl"
			if _, err := os.Stat(filepath.Join(o.binDir, "kubectl")); err == nil && o.binDir != "" {
				o.kubectl = filepath.Join(o.binDir, "kubectl")
			}
		}
	}
	if o.replicaSwitch || o.listRSS {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["namespaces"] {
			namespaces = "10000"
		}
		if !set["globals"] {
			globals = "100"
		}
		// A plain server: no materialized kind, no served ConfigMaps.
		o.materializeRuns, o.policyRuns = 0, 0
		for f := range strings.SplitSeq(switchScopes, ",") {
			if f = strings.TrimSpace(f); f != scopeOne && f != scopeAll {
				fail(2, "-switch-scopes: %q is neither one nor all", f)
			}
			o.switchScopes = append(o.switchScopes, strings.TrimSpace(f))
		}
	}
	var err error
	if o.namespaces, err = ints(namespaces); err != nil {
		fail(2, "-namespaces: %v", err)
	}
	if o.globals, err = ints(globals); err != nil || !slices.IsSorted(o.globals) {
		fail(2, "-globals: want ascending positive integers (%v)", err)
	}
	if o.binDir == "" || o.binary == "" {
		fail(2, "bench needs -bin-dir (or IMPLICIT_TOOLS_BIN) and -implicit-binary (or IMPLICIT_BINARY)")
	}
	if o.runs < 1 || o.copyRuns < 1 || o.slowCopyRuns < 0 || o.materializeRuns < 0 || o.sameKindCopyRuns < 0 || o.promotionRuns < 0 || o.policyRuns < 0 || o.listRuns < 1 || o.authzRequests < 1 || o.watchersPerConn < 1 || o.burstPerConn < 1 {
		fail(2, "-runs, -copy-runs, -list-runs, -authz-requests and -watchers-per-client must be positive; -qps50-runs and -materialize-runs not negative")
	}
	if !(o.materializeQPS > 0) || math.IsInf(o.materializeQPS, 0) {
		fail(2, "-materialize-qps must be positive")
	}
	o.implicitArgs = strings.Fields(implicitArgs)
	for f := range strings.SplitSeq(aloneFleets, ",") {
		if f = strings.TrimSpace(f); f != fleetViews && f != fleetNative && f != fleetReference {
			fail(2, "-alone-fleets: %q is none of views, native, reference", f)
		}
		o.aloneFleets = append(o.aloneFleets, strings.TrimSpace(f))
	}
	if !o.fanoutOnly {
		o.concurrent = true
	}
	if o.plotPath == "" {
		o.plotPath = o.outDir + "/bench-propagation.png"
	}
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		fail(1, "%v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	switch {
	case o.edges:
		err = edges(ctx, o)
	case o.explain:
		err = explainBench(ctx, o)
	case o.listRSS:
		err = listRSS(ctx, o)
	case o.replicaSwitch:
		err = replicaSwitch(ctx, o)
	default:
		err = sweep(ctx, o)
	}
	cancel()
	stop()
	if err != nil {
		fail(1, "bench: %v", err)
	}
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(code)
}

func ints(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is no positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}
