package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
)

// The aggregated-path reference (issue 32): k8s.io/sample-apiserver, an
// etcd-backed aggregated server with the apiserver watch cache, behind the
// same aggregator as implicit-apiserver. Its fan-out of one Flunder edit is
// what the aggregator's proxy costs any aggregated API.
var (
	flunders        = schema.GroupVersionResource{Group: "wardle.example.com", Version: "v1alpha1", Resource: "flunders"}
	apiServices     = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	flunderNS       = "bench-wardle"
	flunderName     = "flunder-0"
	sampleAPIServer = "sample-apiserver"
)

// fleetKind names the three fleets measured alone.
const (
	fleetViews     = "views"
	fleetNative    = "native"
	fleetReference = "reference"
)

// aloneResult is one N's fan-out with each fleet alone on the cluster:
// Rounds per fleet are the rounds of every repetition, pooled; Open is the
// time to open the fleet (one list, then N watches, each until its
// response headers), once per repetition.
type aloneResult struct {
	G        int                 `json:"g"`
	Watchers int                 `json:"watchers"`
	Repeats  int                 `json:"repeats"`
	Rounds   map[string]samples  `json:"rounds"`
	Open     map[string]samples  `json:"open"`
	PerRun   map[string][]string `json:"perRun,omitempty"` // "median (open)" of each repetition, in order
	User     string              `json:"user"`             // who the watchers are
	// CPU per fleet is the CPU time per timed edit of kube-apiserver and
	// of the server behind it (implicit-apiserver, sample-apiserver; none
	// for native), one entry per repetition: less sensitive than wall
	// time to what else runs on the machine.
	CPU map[string][]editCPU `json:"cpu,omitempty"`
	// Burst is the same fleets opened as a reconnect storm opens them
	// (-burst), measured in the same repetitions right after each gentle
	// opening; Opens are its openings' details.
	Burst *aloneResult           `json:"burst,omitempty"`
	Opens map[string][]burstOpen `json:"opens,omitempty"`
}

// editCPU is the CPU time of one repetition's timed edits, per edit.
type editCPU struct {
	Kube    time.Duration `json:"kube"`
	Backend time.Duration `json:"backend"`
}

func (c editCPU) String() string {
	if c.Backend == 0 {
		return fmt.Sprintf("kube-apiserver %s", dur(c.Kube))
	}
	return fmt.Sprintf("kube-apiserver %s + server %s = %s", dur(c.Kube), dur(c.Backend), dur(c.Kube+c.Backend))
}

// medianCPU is the repetitions' median of the total CPU per edit.
func medianCPU(cs []editCPU) time.Duration {
	var s samples
	for _, c := range cs {
		s = append(s, c.Kube+c.Backend)
	}
	return s.median()
}

// watcher makes -watch-user a user allowed to read what the three fleets
// watch, in every namespace (a ClusterRoleBinding), and nothing else: the
// watchers are not system:masters, whose requests every authorizer allows
// without a review.
func (b *bench) watcher(ctx context.Context) error {
	if b.watcherCfg != nil {
		return nil
	}
	name := b.o.watchUser
	read := []string{"get", "list", "watch"}
	if _, err := b.kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{rbacv1.GroupName, viewRoleBindings.Group}, Resources: []string{"rolebindings"}, Verbs: read},
			{APIGroups: []string{flunders.Group}, Resources: []string{flunders.Resource}, Verbs: read},
		},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := b.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: name}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	cfg, err := b.cp.UserConfig(name)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = b.cfg.QPS, b.cfg.Burst
	b.watcherCfg = cfg
	return nil
}

// startReference starts sample-apiserver on the control plane's etcd,
// registers it with an APIService of its own (v1alpha1.wardle.example.com)
// and creates the Flunder the reference fleet watches.
func (b *bench) startReference(ctx context.Context) error {
	binary := filepath.Join(b.o.binDir, sampleAPIServer)
	if _, err := os.Stat(binary); err != nil {
		return fmt.Errorf("%w (build it with hack/build-tools.sh sample-apiserver, or run with -reference=false)", err)
	}
	start := time.Now()
	srv, err := b.cp.StartAggregated(ctx, controlplane.AggregatedServerOptions{
		Binary: binary, Name: sampleAPIServer,
		Args: []string{"--etcd-servers=" + b.cp.EtcdURL(), "--etcd-prefix=/registry-wardle", "-v=1"},
	})
	if err != nil {
		return fmt.Errorf("starting sample-apiserver: %w", err)
	}
	b.sample = srv
	quiet := rest.CopyConfig(b.cfg)
	quiet.WarningHandler = rest.NoWarnings{} // "Flunder is deprecated", on every request
	if b.flunderDyn, err = dynamic.NewForConfig(quiet); err != nil {
		return err
	}
	if b.sampleSrv, err = b.newServer(sampleAPIServer, srv.URL(), srv.Process); err != nil {
		return err
	}
	port := int32(srv.Port())
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: controlplane.ServiceNamespace, Name: "sample-apiserver-local"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeExternalName, ExternalName: "localhost",
			Ports: []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(port)}},
		},
	}
	if _, err := b.kube.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("sample-apiserver's Service: %w", err)
	}
	apiService := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": flunders.Version + "." + flunders.Group},
		"spec": map[string]any{
			"group": flunders.Group, "version": flunders.Version,
			"service": map[string]any{"namespace": svc.Namespace, "name": svc.Name, "port": int64(port)},
			// Self-signed on loopback, as RegisterAPIService does for implicit-apiserver.
			"insecureSkipTLSVerify": true, "groupPriorityMinimum": int64(100), "versionPriority": int64(15),
		},
	}}
	if _, err := b.dyn.Resource(apiServices).Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("sample-apiserver's APIService: %w", err)
	}
	if err := b.createNamespace(ctx, flunderNS, map[string]string{"implicit.dev/inherit": "false"}); err != nil {
		return err
	}
	flunder := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": flunders.GroupVersion().String(), "kind": "Flunder",
		"metadata": map[string]any{"name": flunderName, "labels": map[string]any{labelBench: "0"}},
	}}
	// Until the APIService is available and the namespace known to
	// sample-apiserver's admission.
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = b.flunderDyn.Resource(flunders).Namespace(flunderNS).Create(ctx, flunder, metav1.CreateOptions{})
		return last == nil, nil
	}); err != nil {
		return fmt.Errorf("creating Flunder %s/%s through the aggregator: %v (%w)\n%s", flunderNS, flunderName, last, err, srv.LogTail(20))
	}
	fmt.Printf("sample-apiserver (the aggregated-path reference) ready and registered in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// referenceFleet is n watchers of the one Flunder (fieldSelector
// metadata.name) through the aggregator, served by sample-apiserver's
// watch cache.
func referenceFleet(n int) fleetSpec {
	path := "/apis/" + flunders.Group + "/" + flunders.Version + "/namespaces/" + flunderNS + "/" + flunders.Resource
	s := fleetSpec{what: fmt.Sprintf("flunders.%s %s/%s (sample-apiserver's watch cache)", flunders.Group, flunderNS, flunderName), list: path,
		fieldSelector: "metadata.name=" + flunderName, noSubjects: true}
	for range n {
		s.paths = append(s.paths, path)
	}
	return s
}

// measureAlone measures the fan-out of one edit with each fleet alone on
// the cluster (opened, warmed and timed with the others closed), -alone-repeats
// times interleaved: views, native, reference, views, native, ... Each
// fleet has exactly N watchers (no -A view watcher).
func (b *bench) measureAlone(ctx context.Context, res *nResult) error {
	ar := &aloneResult{G: b.globals, Watchers: b.n, Repeats: b.o.aloneRepeats,
		Rounds: map[string]samples{}, Open: map[string]samples{}, PerRun: map[string][]string{}, CPU: map[string][]editCPU{}}
	res.Alone = ar
	var kinds []string
	for _, k := range b.o.aloneFleets {
		if k != fleetReference || b.sampleSrv != nil {
			kinds = append(kinds, k)
		}
	}
	if b.o.watchUser != "" {
		if err := b.watcher(ctx); err != nil {
			return err
		}
	}
	who := "admin (system:masters)"
	if b.o.watchUser != "" {
		who = b.o.watchUser + " (a ClusterRole to read the three fleets' resources)"
	}
	ar.User = who
	fmt.Printf("N=%d, fan-out with each fleet alone (%d repetitions, %d rounds each), watchers as %s:\n", b.n, b.o.aloneRepeats, b.o.aloneRuns, who)
	modes := []*aloneResult{ar}
	if b.o.burst {
		ar.Burst = &aloneResult{G: b.globals, Watchers: b.n, Repeats: b.o.aloneRepeats, User: who,
			Rounds: map[string]samples{}, Open: map[string]samples{}, PerRun: map[string][]string{}, CPU: map[string][]editCPU{}, Opens: map[string][]burstOpen{}}
		modes = append(modes, ar.Burst)
	}
	for rep := range b.o.aloneRepeats {
		for _, kind := range kinds {
			for _, m := range modes {
				burst := m != ar
				mode := "gentle"
				if burst {
					mode = "burst"
				}
				b.prog.show("alone N=%d %s %s, repetition %d", b.n, kind, mode, rep+1)
				rounds, open, cpu, err := b.aloneFleet(ctx, kind, rep, m)
				if err != nil {
					return fmt.Errorf("%s alone (%s): %w", kind, mode, err)
				}
				m.CPU[kind] = append(m.CPU[kind], cpu)
				m.Rounds[kind] = append(m.Rounds[kind], rounds...)
				m.Open[kind] = append(m.Open[kind], open)
				m.PerRun[kind] = append(m.PerRun[kind], fmt.Sprintf("%s (open %s)", dur(rounds.median()), dur(open)))
				b.prog.step("alone N=%d %s %s repetition %d: median %s, p99 %s, opened in %s", b.n, kind, mode, rep+1, dur(rounds.median()), dur(rounds.p99()), dur(open))
			}
		}
	}
	ar.summary("gentle (16 opening at a time)", kinds)
	if ar.Burst != nil {
		ar.Burst.summary(fmt.Sprintf("burst (all at once, %d per connection)", b.o.burstPerConn), kinds)
	}
	return nil
}

// summary prints the fleets' fan-out, openings and CPU per edit, and their
// ratios, for one way of opening them.
func (ar *aloneResult) summary(mode string, kinds []string) {
	fmt.Printf("  %s:\n", mode)
	for _, kind := range kinds {
		fmt.Printf("  %-9s alone: %s; fleet opened in %s; per repetition %v; CPU per edit, median %s\n", kind, ar.Rounds[kind], ar.Open[kind], ar.PerRun[kind], dur(medianCPU(ar.CPU[kind])))
	}
	fmt.Printf("  views / native alone: median %s, p99 %s; opening %s; CPU per edit %s\n", ratio(ar.Rounds[fleetViews].median(), ar.Rounds[fleetNative].median()),
		ratio(ar.Rounds[fleetViews].p99(), ar.Rounds[fleetNative].p99()), ratio(ar.Open[fleetViews].median(), ar.Open[fleetNative].median()),
		ratio(medianCPU(ar.CPU[fleetViews]), medianCPU(ar.CPU[fleetNative])))
	if len(ar.Rounds[fleetReference]) > 0 {
		fmt.Printf("  reference / native alone: median %s, p99 %s; views / reference %s, p99 %s; opening: reference / native %s, views / reference %s; CPU per edit: views / reference %s\n",
			ratio(ar.Rounds[fleetReference].median(), ar.Rounds[fleetNative].median()), ratio(ar.Rounds[fleetReference].p99(), ar.Rounds[fleetNative].p99()),
			ratio(ar.Rounds[fleetViews].median(), ar.Rounds[fleetReference].median()), ratio(ar.Rounds[fleetViews].p99(), ar.Rounds[fleetReference].p99()),
			ratio(ar.Open[fleetReference].median(), ar.Open[fleetNative].median()), ratio(ar.Open[fleetViews].median(), ar.Open[fleetReference].median()),
			ratio(medianCPU(ar.CPU[fleetViews]), medianCPU(ar.CPU[fleetReference])))
	}
}

// aloneFleet opens one fleet of kind, makes one unrecorded edit, then
// -alone-runs timed edits, and closes it. It returns the rounds, the time
// the fleet took to open and the servers' CPU time per timed edit.
//
// m is where the figures go: the gentle opening's (16 watchers opening at
// a time) or, when m is the burst's, every watcher at once (startBurst).
func (b *bench) aloneFleet(ctx context.Context, kind string, rep int, m *aloneResult) (samples, time.Duration, editCPU, error) {
	burst, mode := m.Opens != nil, ""
	if burst {
		mode = "burst-"
	}
	var spec fleetSpec
	var edit func(ctx context.Context, value string) error
	name := globalName(0)
	switch kind {
	case fleetViews:
		spec = viewFleet(viewRoleBindings, b.tenants, false)
	case fleetNative:
		spec = sourceFleet(name, len(b.tenants))
	case fleetReference:
		spec, name = referenceFleet(len(b.tenants)), flunderName
	}
	edit = func(ctx context.Context, value string) error {
		_, err := b.kube.RbacV1().RoleBindings(globalNS).Patch(ctx, globalName(0), types.MergePatchType, labelPatch(value), metav1.PatchOptions{})
		return err
	}
	if kind == fleetReference {
		edit = func(ctx context.Context, value string) error {
			_, err := b.flunderDyn.Resource(flunders).Namespace(flunderNS).Patch(ctx, flunderName, types.MergePatchType, labelPatch(value), metav1.PatchOptions{})
			return err
		}
	}
	spec.listEach, spec.cfg = true, b.watcherCfg
	var profiled []func()
	if rep == 0 && b.o.openProfile > 0 {
		// Where the opening goes: kube-apiserver (the aggregator's proxy
		// and authorization, or its watch cache) and the server behind it.
		tag := fmt.Sprintf("N%d-%sopen-%s", b.n, mode, kind)
		profiled = append(profiled, b.kubeSrv.cpuProfile(ctx, b.o.outDir, tag, b.o.openProfile))
		switch kind {
		case fleetViews:
			profiled = append(profiled, b.implicitSrv.cpuProfile(ctx, b.o.outDir, tag, b.o.openProfile))
		case fleetReference:
			profiled = append(profiled, b.sampleSrv.cpuProfile(ctx, b.o.outDir, tag, b.o.openProfile))
		}
		time.Sleep(100 * time.Millisecond) // the profiles have started
	}
	backend := map[string]*server{fleetViews: b.implicitSrv, fleetReference: b.sampleSrv}[kind]
	var f *fleet
	var open time.Duration
	var err error
	if burst {
		port := 0
		switch kind {
		case fleetViews:
			port = b.implicit.Port()
		case fleetReference:
			port = b.sample.Port()
		}
		servers := []*server{b.kubeSrv}
		if backend != nil {
			servers = append(servers, backend)
		}
		before := make([]map[string]float64, len(servers))
		for i, s := range servers {
			if before[i], err = s.series(ctx, openMetrics); err != nil {
				return nil, 0, editCPU{}, err
			}
		}
		var bo burstOpen
		f, bo, err = b.startBurst(ctx, spec, b.tenants, backend, port)
		open = bo.Open
		if err == nil {
			m.Opens[kind] = append(m.Opens[kind], bo)
			for i, s := range servers {
				after, serr := s.series(ctx, openMetrics)
				if serr != nil {
					fmt.Printf("    (%v)\n", serr)
					continue
				}
				openReport(s, before[i], after)
			}
		}
	} else {
		start := time.Now()
		f, err = b.startFleet(ctx, spec, b.tenants)
		open = time.Since(start)
	}
	for _, wait := range profiled {
		wait()
	}
	if err != nil {
		return nil, 0, editCPU{}, err
	}
	defer func() {
		f.stop()
		// Let the servers let go of the closed watches before the next fleet.
		time.Sleep(2 * time.Second)
	}()
	var out samples
	if rep == 0 && b.o.roundsProfile > 0 {
		// Where the fan-out goes, for this fleet alone.
		tag := fmt.Sprintf("N%d-%salone-%s", b.n, mode, kind)
		defer b.kubeSrv.cpuProfile(ctx, b.o.outDir, tag, b.o.roundsProfile)()
		switch kind {
		case fleetViews:
			defer b.implicitSrv.cpuProfile(ctx, b.o.outDir, tag, b.o.roundsProfile)()
		case fleetReference:
			defer b.sampleSrv.cpuProfile(ctx, b.o.outDir, tag, b.o.roundsProfile)()
		}
	}
	var kubeCPU, backendCPU time.Duration
	var kubeIO, backendIO ioCounts
	for i := -1; i < b.o.aloneRuns; i++ {
		if i == 0 {
			// After the unrecorded edit: the timed edits' CPU only.
			kubeCPU, kubeIO = b.kubeSrv.cpu(), b.kubeSrv.io()
			if backend != nil {
				backendCPU, backendIO = backend.cpu(), backend.io()
			}
		}
		value := fmt.Sprintf("alone-%s-%d-%d", kind, rep, i+1)
		r := newRound(name, value, f.open, 0, false)
		last, _, err := f.measure(ctx, r, roundTimeout, func(ctx context.Context) error { return edit(ctx, value) })
		if err != nil {
			return nil, 0, editCPU{}, err
		}
		if i >= 0 {
			out = append(out, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var cpu editCPU
	if runs := time.Duration(b.o.aloneRuns); runs > 0 {
		cpu.Kube = (b.kubeSrv.cpu() - kubeCPU) / runs
		if backend != nil {
			cpu.Backend = (backend.cpu() - backendCPU) / runs
		}
	}
	fmt.Printf("  %s alone (%s), repetition %d: %s; opened in %s (per watcher: list %s, watch %s); reconnects %d; CPU per edit: %s\n",
		kind, map[bool]string{false: "gentle", true: "burst"}[burst], rep+1, out, dur(open), f.lists, f.watches, f.reconnects.Load(), cpu)
	if runs := int64(b.o.aloneRuns); runs > 0 {
		fmt.Printf("    per edit, kube-apiserver: %s", b.kubeSrv.io().per(kubeIO, runs))
		if backend != nil {
			fmt.Printf("; server: %s", backend.io().per(backendIO, runs))
		}
		fmt.Println()
	}
	return out, open, cpu, nil
}

// aloneMarkdown writes the table of the fleets alone, beside the concurrent
// figures of the same N, when any N measured it.
func (r *results) aloneMarkdown(p func(string, ...any), mp func(samples) string) {
	var ns []*nResult
	for _, n := range r.Ns {
		if n.Alone != nil {
			ns = append(ns, n)
		}
	}
	if len(ns) == 0 {
		return
	}
	p("### Fan-out of one edit with each fleet alone, and the aggregated-path reference")
	p("")
	p("| N | G | views alone: last watcher, median | p99 | native alone, median | p99 | sample-apiserver alone (reference), median | p99 | views / native | reference / native | views / reference | concurrent (both fleets open): views / native | rounds per fleet |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range ns {
		a := n.Alone
		v, nat, ref := a.Rounds[fleetViews], a.Rounds[fleetNative], a.Rounds[fleetReference]
		conc := "–"
		if len(n.G) > 0 {
			g := n.G[len(n.G)-1]
			conc = ratio(g.Implicit.median(), g.Native.median())
		}
		p("| %d | %d | %s | %s | %s | %s | %s | %s | %s | %d |", n.N, a.G, mp(v), mp(nat), mp(ref),
			ratio(v.median(), nat.median()), ratio(ref.median(), nat.median()), ratio(v.median(), ref.median()), conc, len(v))
	}
	p("")
	p("| N | opening the fleet (each watcher: a list, then a watch from its version): views, median | slowest | native, median | slowest | reference, median | slowest | views / native | views / reference |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range ns {
		a := n.Alone
		v, nat, ref := a.Open[fleetViews], a.Open[fleetNative], a.Open[fleetReference]
		p("| %d | %s | %s | %s | %s | %s |", n.N, mp(v), mp(nat), mp(ref), ratio(v.median(), nat.median()), ratio(v.median(), ref.median()))
	}
	p("")
	p("| N | CPU per edit, median of the repetitions: views (kube-apiserver + implicit-apiserver) | native (kube-apiserver) | reference (kube-apiserver + sample-apiserver) | views / native | views / reference |")
	p("|---:|---:|---:|---:|---:|---:|")
	for _, n := range ns {
		c := n.Alone.CPU
		v, nat, ref := medianCPU(c[fleetViews]), medianCPU(c[fleetNative]), medianCPU(c[fleetReference])
		p("| %d | %s | %s | %s | %s | %s |", n.N, dur(v), dur(nat), dur(ref), ratio(v, nat), ratio(v, ref))
	}
	p("")
	p("Each fleet is N watchers as %s, opened informer-style (each watcher lists its path, then watches from that list's resourceVersion; %d watchers opening at a time, %s) and decoding the same minimal fields, alone on the cluster: views (one watch per tenant on rolebindings.implicit.dev through the aggregator, no -A watcher), native (N watches of the source RoleBinding, fieldSelector metadata.name, kube-apiserver's watch cache) and the reference (N watches of one Flunder of k8s.io/sample-apiserver, etcd-backed, with the apiserver watch cache, behind the same aggregator). Each is opened, given one unrecorded edit, timed over -alone-runs edits and closed before the next; the three are repeated -alone-repeats times interleaved (views, native, reference, views, ...), and the rounds of all repetitions pooled. Per repetition, in order:", ns[0].Alone.User, workers, "-watchers-per-client watchers per client connection")
	p("")
	for _, n := range ns {
		for _, kind := range []string{fleetViews, fleetNative, fleetReference} {
			if runs := n.Alone.PerRun[kind]; len(runs) > 0 {
				p("- N = %d, %s: %s", n.N, kind, strings.Join(runs, "; "))
			}
		}
	}
	p("")
	r.burstMarkdown(p, ns)
}

// burstMarkdown writes the burst mode's table (-burst) beside the gentle
// method's figures of the same repetitions.
func (r *results) burstMarkdown(p func(string, ...any), ns []*nResult) {
	if ns[0].Alone.Burst == nil {
		return
	}
	p("### Each fleet alone opened as a reconnect storm opens it (-burst), beside the gentle opening")
	p("")
	p("| N | method | opening: views | native | reference | views / native | reference / native | views / reference | fan-out median: views / native | reference / native | views / reference | p99: views / native | CPU per edit: views / native | views / reference |")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range ns {
		for _, m := range []struct {
			name string
			a    *aloneResult
		}{{"gentle", n.Alone}, {"burst", n.Alone.Burst}} {
			o, rd, c := m.a.Open, m.a.Rounds, m.a.CPU
			v, nat, ref := fleetViews, fleetNative, fleetReference
			p("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |", n.N, m.name,
				dur(o[v].median()), dur(o[nat].median()), dur(o[ref].median()),
				ratio(o[v].median(), o[nat].median()), ratio(o[ref].median(), o[nat].median()), ratio(o[v].median(), o[ref].median()),
				ratio(rd[v].median(), rd[nat].median()), ratio(rd[ref].median(), rd[nat].median()), ratio(rd[v].median(), rd[ref].median()),
				ratio(rd[v].p99(), rd[nat].p99()), ratio(medianCPU(c[v]), medianCPU(c[nat])), ratio(medianCPU(c[v]), medianCPU(c[ref])))
		}
	}
	p("")
	p("Burst: every watcher of the fleet at once, each a list of its path then a watch from that list's resourceVersion, -burst-per-client watchers on each client connection (connected before), a 429 sent again after its Retry-After; opened right after the gentle opening of the same fleet in each repetition, then timed over the same edits. Its opening is from the burst's start to the last watch's response headers.")
	p("")
}
