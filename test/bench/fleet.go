package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// The fleet benchmark (issue 44): one hub, R real member implicit-apiservers
// (sharing one member control plane, each its own member of the fleet) and S
// simulated members (what a member costs the hub: its informers of the
// global namespace, its registration's watch and its reports), all on one
// machine. It reports the hub kube-apiserver's CPU and watches with the
// fleet connected, a hub edit's time to the last member, and after a hub
// outage the time until every member serves the hub's next edit, with the
// LISTs that cost the hub.

// fleetOptions are -fleet's.
type fleetOptions struct {
	real, simulated, tenants, globals, rounds int
	outage, idle                              time.Duration
}

// fleetHub is the hub side of the run.
type fleetHub struct {
	cp   *controlplane.ControlPlane
	kube kubernetes.Interface
	dyn  dynamic.Interface
	srv  *server
}

func fleetBench(ctx context.Context, o options, fo fleetOptions) error {
	work, err := os.MkdirTemp("", "implicit-fleet-bench-")
	if err != nil {
		return err
	}
	fmt.Printf("== fleet: a hub, %d real members (one member control plane, %d tenants), %d simulated members, %d global RoleBindings; work dir %s\n",
		fo.real, fo.tenants, fo.simulated, fo.globals, work)
	ok := false
	hubCP, err := controlplane.Start(ctx, controlplane.Options{BinDir: o.binDir, WorkDir: filepath.Join(work, "hub")})
	if err != nil {
		return fmt.Errorf("starting the hub: %w", err)
	}
	defer func() {
		hubCP.Stop()
		if ok && !o.keepWorkDir {
			os.RemoveAll(work)
		} else {
			fmt.Printf("logs kept in %s\n", work)
		}
	}()
	memberCP, err := controlplane.Start(ctx, controlplane.Options{BinDir: o.binDir, WorkDir: filepath.Join(work, "member"),
		ExternalEtcdURL: hubCP.EtcdURL(), EtcdPrefix: "/member"})
	if err != nil {
		return fmt.Errorf("starting the member control plane: %w", err)
	}
	defer memberCP.Stop()

	hub, err := newFleetHub(hubCP)
	if err != nil {
		return err
	}
	if err := hub.setup(ctx, fo); err != nil {
		return err
	}
	idleCPU := hub.idleCPU(ctx, fo.idle)
	base, err := hub.srv.metrics(ctx, "apiserver_longrunning_requests")
	if err != nil {
		return err
	}
	fmt.Printf("hub alone: kube-apiserver CPU %.1f%% of a core idle, %v long-running requests\n", idleCPU*100, base["apiserver_longrunning_requests"])

	members, err := startRealMembers(ctx, o, fo, hubCP, memberCP)
	if err != nil {
		return err
	}
	sims, err := startSimulated(ctx, hubCP, fo)
	if err != nil {
		return err
	}
	defer sims.stop()
	if err := hub.waitReports(ctx, fo, 3*time.Minute); err != nil {
		return err
	}
	idleFleet := hub.idleCPU(ctx, fo.idle)
	conn, err := hub.srv.metrics(ctx, "apiserver_longrunning_requests")
	if err != nil {
		return err
	}
	fmt.Printf("hub with the fleet: kube-apiserver CPU %.1f%% of a core idle (alone %.1f%%), long-running requests %v (alone %v), RSS %s\n",
		idleFleet*100, idleCPU*100, conn["apiserver_longrunning_requests"], base["apiserver_longrunning_requests"], mib(procRSS(hubCP.KubeAPIServer().Pid())))

	var realT, simT, reportT samples
	cpuBefore := procCPU(hubCP.KubeAPIServer().Pid())
	for r := range fo.rounds {
		value := "round-" + strconv.Itoa(r)
		res, err := hub.edit(ctx, value, members, sims)
		if err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
		realT, simT, reportT = append(realT, res.real), append(simT, res.simulated), append(reportT, res.reports)
		fmt.Printf("  round %d: last real member's view %s, last simulated member %s, every report %s\n", r, res.real, res.simulated, res.reports)
	}
	cpuEdit := (procCPU(hubCP.KubeAPIServer().Pid()) - cpuBefore) / time.Duration(fo.rounds)
	fmt.Printf("hub edit to the last member (%d rounds): real members' views p50 %s max %s; simulated members p50 %s max %s; every member's report p50 %s max %s; hub CPU %s per edit (reports included)\n",
		fo.rounds, realT.median(), slices.Max(realT), simT.median(), slices.Max(simT), reportT.median(), slices.Max(reportT), cpuEdit.Round(time.Millisecond))

	if fo.outage > 0 {
		if err := hub.outage(ctx, fo, members, sims); err != nil {
			return err
		}
	}
	ok = true
	return nil
}

func newFleetHub(cp *controlplane.ControlPlane) (*fleetHub, error) {
	cfg := cp.AdminConfig()
	cfg.QPS, cfg.Burst = -1, 0
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	b := &bench{cfg: cfg}
	srv, err := b.newServer("hub kube-apiserver", cp.APIServerURL(), cp.KubeAPIServer)
	if err != nil {
		return nil, err
	}
	return &fleetHub{cp: cp, kube: kube, dyn: dyn, srv: srv}, nil
}

// memberName names real member i (from 1) and simName simulated member i.
func memberName(i int) string { return fmt.Sprintf("member-%d", i) }
func simName(i int) string    { return fmt.Sprintf("sim-%03d", i) }

// setup installs the MemberCluster CRD, registers every member (the first
// real one in the canary stage) and creates the global sources.
func (h *fleetHub) setup(ctx context.Context, fo fleetOptions) error {
	crd, err := filepath.Abs("../../artifacts/fleet/hub/crd-memberclusters.yaml")
	if err != nil {
		return err
	}
	if _, stderr, err := h.cp.Kubectl(ctx, "apply", "-f", crd); err != nil {
		return fmt.Errorf("applying %s: %w: %s", crd, err, stderr)
	}
	if _, stderr, err := h.cp.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd/memberclusters.fleet.implicit.dev"); err != nil {
		return fmt.Errorf("waiting for the CRD: %w: %s", err, stderr)
	}
	var names []string
	for i := 1; i <= fo.real; i++ {
		names = append(names, memberName(i))
	}
	for i := range fo.simulated {
		names = append(names, simName(i))
	}
	mc := h.dyn.Resource(fleetv1alpha1.GroupVersionResource)
	if err := parallel(ctx, len(names), workers, func(ctx context.Context, i int) error {
		stage := "main"
		if i == 0 {
			stage = "canary"
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(fleetv1alpha1.GroupVersionKind)
		u.SetName(names[i])
		u.SetLabels(map[string]string{"implicit.dev/cluster-stage": stage})
		_, err := mc.Create(ctx, u, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("registering the members: %w", err)
	}
	if _, err := h.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: globalNS}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	return parallel(ctx, fo.globals, workers, func(ctx context.Context, i int) error {
		_, err := h.kube.RbacV1().RoleBindings(globalNS).Create(ctx, roleBinding(globalName(i)), metav1.CreateOptions{})
		return err
	})
}

// idleCPU is the hub kube-apiserver's CPU, in cores, over d of quiet.
func (h *fleetHub) idleCPU(ctx context.Context, d time.Duration) float64 {
	pid := h.cp.KubeAPIServer().Pid()
	before := procCPU(pid)
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	return float64(procCPU(pid)-before) / float64(d)
}

// reported returns how many MemberClusters report serving at least rv
// (0: any report at all).
func (h *fleetHub) reported(ctx context.Context, rv uint64) (int, int, error) {
	l, err := h.dyn.Resource(fleetv1alpha1.GroupVersionResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	n := 0
	for _, it := range l.Items {
		served, _, _ := unstructured.NestedString(it.Object, "status", "servedRevision")
		got, _ := strconv.ParseUint(served, 10, 64)
		if served != "" && got >= rv {
			n++
		}
	}
	return n, len(l.Items), nil
}

// waitReports waits until every member has reported once.
func (h *fleetHub) waitReports(ctx context.Context, fo fleetOptions, timeout time.Duration) error {
	start := time.Now()
	var n, of int
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		n, of, err = h.reported(ctx, 0)
		return err == nil && n == fo.real+fo.simulated, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d members reported within %s: %w", n, of, timeout, err)
	}
	fmt.Printf("every member (%d) reported %s after the last started\n", n, time.Since(start).Round(time.Millisecond))
	return nil
}

// editResult is one edit's times, from the hub's answer to the write.
type editResult struct{ real, simulated, reports time.Duration }

// edit labels global-0 on the hub with value and times it to each side.
func (h *fleetHub) edit(ctx context.Context, value string, members []*realMember, sims *simulated) (editResult, error) {
	watches := make([]watch.Interface, len(members))
	for i, m := range members {
		w, err := m.watchProbe(ctx)
		if err != nil {
			return editResult{}, err
		}
		defer w.Stop()
		watches[i] = w
	}
	start := time.Now()
	rb, err := h.kube.RbacV1().RoleBindings(globalNS).Patch(ctx, globalName(0), types.MergePatchType, labelPatch(value), metav1.PatchOptions{})
	if err != nil {
		return editResult{}, err
	}
	rv := rb.ResourceVersion
	want, _ := strconv.ParseUint(rv, 10, 64)
	var res editResult
	var wg sync.WaitGroup
	errs := make([]error, len(members))
	done := make([]time.Duration, len(members))
	for i, w := range watches {
		wg.Go(func() { done[i], errs[i] = waitSourceRV(ctx, w, rv, start) })
	}
	simDone, simErr := sims.waitRV(ctx, want, start, 2*time.Minute)
	wg.Wait()
	for _, err := range append(errs, simErr) {
		if err != nil {
			return res, err
		}
	}
	res.real, res.simulated = slices.Max(done), simDone
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, of, err := h.reported(ctx, want)
		return err == nil && n == of, nil
	})
	res.reports = time.Since(start)
	return res, err
}

// waitSourceRV waits on w for the probe item served from the hub's rv, and
// returns the time since start.
func waitSourceRV(ctx context.Context, w watch.Interface, rv string, start time.Time) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no view event with the hub's resourceVersion %s", rv)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return 0, fmt.Errorf("a view watch ended before the hub's resourceVersion %s", rv)
			}
			if u, isU := ev.Object.(*unstructured.Unstructured); isU && u.GetAnnotations()[v1alpha1.AnnotationSourceResourceVersion] == rv {
				return time.Since(start), nil
			}
		}
	}
}

// outage stops the hub's kube-apiserver for fo.outage, starts it again,
// edits global-0 once it is ready, and times every member to that edit,
// counting the hub's LISTs meanwhile.
func (h *fleetHub) outage(ctx context.Context, fo fleetOptions, members []*realMember, sims *simulated) error {
	fmt.Printf("hub outage: stopping the hub's kube-apiserver for %s\n", fo.outage)
	if err := h.cp.StopKubeAPIServer(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(fo.outage):
	}
	listsBefore := sims.lists.Load()
	start := time.Now()
	if err := h.cp.StartKubeAPIServer(ctx); err != nil {
		return err
	}
	ready := time.Since(start)
	res, err := h.edit(ctx, "after-outage", members, sims)
	if err != nil {
		return fmt.Errorf("the edit after the outage: %w", err)
	}
	time.Sleep(10 * time.Second) // the relists that come after
	lists, err := h.srv.metrics(ctx, "apiserver_request_total")
	if err != nil {
		return err
	}
	fmt.Printf("after a %s hub outage: hub ready again in %s; its next edit reached the last real member's view in %s, the last simulated member in %s, every member's report in %s; "+
		"simulated members listed %d times (the hub's kube-apiserver served %v requests since its restart)\n",
		fo.outage, ready.Round(time.Millisecond), res.real, res.simulated, res.reports, sims.lists.Load()-listsBefore, lists["apiserver_request_total"])
	return nil
}

// realMember is one real member implicit-apiserver, read directly.
type realMember struct {
	name string
	srv  *controlplane.AggregatedServer
	dyn  dynamic.Interface
}

// startRealMembers starts fo.real implicit-apiservers on the member
// control plane, each its own member of the fleet.
func startRealMembers(ctx context.Context, o options, fo fleetOptions, hub, member *controlplane.ControlPlane) ([]*realMember, error) {
	kube, err := kubernetes.NewForConfig(member.AdminConfig())
	if err != nil {
		return nil, err
	}
	for _, ns := range []string{globalNS, "org-0"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	if err := parallel(ctx, fo.tenants, workers, func(ctx context.Context, i int) error {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("team-%d", i), Labels: map[string]string{labelParent: "org-0"}}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	var out []*realMember
	for i := 1; i <= fo.real; i++ {
		args := slices.Concat([]string{"-v=1", "--global-kubeconfig=" + hub.KubeconfigPath(), "--global-cluster-name=hub",
			"--fleet-member-name=" + memberName(i), "--webhook-configuration="}, member.WebhookServerArgs(), o.implicitArgs)
		srv, err := member.StartAggregated(ctx, controlplane.AggregatedServerOptions{Binary: o.binary, Name: "implicit-apiserver", Args: args})
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", memberName(i), err)
		}
		cfg := member.AdminConfig()
		cfg.Host, cfg.CAData, cfg.CAFile, cfg.Insecure = srv.URL(), nil, "", true
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, &realMember{name: memberName(i), srv: srv, dyn: dyn})
	}
	return out, nil
}

// watchProbe watches the probe item, global-0 in team-0's view.
func (m *realMember) watchProbe(ctx context.Context) (watch.Interface, error) {
	return m.dyn.Resource(viewRB).Namespace("team-0").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + globalName(0)})
}

// simulated are the simulated members: per member, a connection of its
// own to the hub, informers of the global namespace's RoleBindings, Roles
// and NetworkPolicies, a watch of its registration, and a report written
// at most every 2 s after a change and every 30 s.
type simulated struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	members []*simMember
	lists   atomic.Int64
}

type simMember struct {
	name   string
	served atomic.Uint64 // the highest hub resourceVersion seen
	seen   sync.Map      // resourceVersion -> time first seen
}

func startSimulated(ctx context.Context, hub *controlplane.ControlPlane, fo fleetOptions) (*simulated, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &simulated{cancel: cancel}
	for i := range fo.simulated {
		m := &simMember{name: simName(i)}
		s.members = append(s.members, m)
		cfg := hub.AdminConfig()
		cfg.QPS, cfg.Burst = 20, 40
		cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext // a connection of its own
		cfg.WrapTransport = countLists(&s.lists)
		if err := s.run(ctx, m, cfg, fo); err != nil {
			s.stop()
			return nil, err
		}
	}
	return s, nil
}

func (s *simulated) stop() {
	s.cancel()
	s.wg.Wait()
}

// waitRV waits until every simulated member has seen rv, and returns the
// latest first sight since start.
func (s *simulated) waitRV(ctx context.Context, rv uint64, start time.Time, timeout time.Duration) (time.Duration, error) {
	key := strconv.FormatUint(rv, 10)
	var last time.Duration
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = 0
		for _, m := range s.members {
			t, ok := m.seen.Load(key)
			if !ok {
				return false, nil
			}
			last = max(last, t.(time.Time).Sub(start))
		}
		return true, nil
	})
	if err != nil {
		return 0, fmt.Errorf("simulated members: not every one saw the hub's resourceVersion %d: %w", rv, err)
	}
	return last, nil
}

// countLists counts the LIST requests a simulated member sends.
func countLists(n *atomic.Int64) func(rt http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && req.URL.Query().Get("watch") == "" {
				n.Add(1)
			}
			return rt.RoundTrip(req)
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
