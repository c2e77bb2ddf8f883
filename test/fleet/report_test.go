package fleet

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/implicit-dev/implicit-apiserver/internal/controlplane"
	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

var memberClusters = fleetv1alpha1.GroupVersionResource

// memberCluster reads member's MemberCluster on the hub, as its admin.
func memberCluster(t *testing.T, name string) fleetv1alpha1.MemberCluster {
	t.Helper()
	_, hubDyn := clients(t, hub)
	u, err := hubDyn.Resource(memberClusters).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mc fleetv1alpha1.MemberCluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &mc); err != nil {
		t.Fatal(err)
	}
	return mc
}

// viewCounts is the oracle of a member's report: a fresh list of its
// RoleBinding views, counted per hub item (the sources' by name, the
// candidates' canaries by candidate name), and its tenants from a list of
// its namespaces.
func viewCounts(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane) (tenants int, sources, canaries map[string]int, err error) {
	kube, dyn := clients(t, cp)
	nss, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, nil, nil, err
	}
	for _, ns := range nss.Items {
		switch ns.Name {
		case globalNS, "kube-system", "kube-public", "kube-node-lease":
			continue
		}
		if ns.Labels[v1alpha1.LabelInherit] != "false" {
			tenants++
		}
	}
	views, err := dyn.Resource(viewRoleBindings).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, nil, nil, err
	}
	sources, canaries = map[string]int{}, map[string]int{}
	for _, v := range views.Items {
		a := v.GetAnnotations()
		if v.GetLabels()[v1alpha1.LabelScope] != "global" || a[v1alpha1.AnnotationSourceCluster] != "hub" {
			continue
		}
		if c := a[v1alpha1.AnnotationCandidate]; c != "" {
			canaries[c]++
		} else {
			sources[v.GetName()]++
		}
	}
	return tenants, sources, canaries, nil
}

// reportMatches waits until member's report, written after since, counts
// what a fresh list of its views counts.
func reportMatches(t *testing.T, name string, cp *controlplane.ControlPlane, since time.Time) fleetv1alpha1.MemberCluster {
	t.Helper()
	var mc fleetv1alpha1.MemberCluster
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, converge, true, func(ctx context.Context) (bool, error) {
		mc = memberCluster(t, name)
		st := mc.Status
		if st.ReportTime == nil || !st.ReportTime.After(since) {
			last = fmt.Sprintf("no report since %s (last %v)", since.Format(time.RFC3339), st.ReportTime)
			return false, nil
		}
		tenants, sources, canaries, err := viewCounts(t, ctx, cp)
		if err != nil {
			return false, err
		}
		reported, reportedCanaries := map[string]int{}, map[string]int{}
		for _, s := range st.Sources {
			if s.Resource == "rolebindings.rbac.authorization.k8s.io" {
				reported[s.Name] = int(s.Namespaces)
			}
		}
		for _, c := range st.Candidates {
			if c.Resource == "rolebindings.rbac.authorization.k8s.io" && c.CanaryNamespaces > 0 {
				reportedCanaries[c.Name] = int(c.CanaryNamespaces)
			}
		}
		// A source no view holds is reported with 0.
		for n, c := range reported {
			if c == 0 {
				delete(reported, n)
			}
		}
		last = fmt.Sprintf("report: %d namespaces, sources %v, canaries %v; views: %d tenants, sources %v, canaries %v",
			st.Namespaces, reported, reportedCanaries, tenants, sources, canaries)
		return int(st.Namespaces) == tenants && maps.Equal(reported, sources) && maps.Equal(reportedCanaries, canaries), nil
	})
	if err != nil {
		t.Fatalf("%s's report never matched its views: %v\n%s", name, err, last)
	}
	t.Logf("%s: %s", name, last)
	return mc
}

func sourceReport(mc fleetv1alpha1.MemberCluster, name string) (fleetv1alpha1.SourceReport, bool) {
	for _, s := range mc.Status.Sources {
		if s.Resource == "rolebindings.rbac.authorization.k8s.io" && s.Name == name {
			return s, true
		}
	}
	return fleetv1alpha1.SourceReport{}, false
}

// waitReport waits until member's report satisfies check.
func waitReport(t *testing.T, name, what string, check func(fleetv1alpha1.MemberClusterStatus) error) fleetv1alpha1.MemberCluster {
	t.Helper()
	var mc fleetv1alpha1.MemberCluster
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 300*time.Millisecond, converge, true, func(context.Context) (bool, error) {
		mc = memberCluster(t, name)
		last = check(mc.Status)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s's report: waiting for %s: %v (%v)", name, what, last, err)
	}
	return mc
}

func revisionOf(t *testing.T, rv string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	return n
}

// TestMemberReports: each member's report counts what a fresh list of its
// views shows (shadows, exclusions, a non-tenant and a canary make the
// counts differ from the tenants'); the served revision follows a hub
// edit; member-2, cut off its hub for its sources but reporting on another
// path, reports since when it is stale and keeps its old revision while the
// hub moves on, and recovers once healed.
func TestMemberReports(t *testing.T) {
	hubKube, _ := clients(t, hub)
	kube1, _ := clients(t, member1)
	kube2, _ := clients(t, member2)
	for _, kube := range []kubernetes.Interface{kube1, kube2} {
		createNamespace(t, kube, "fr-org", "")
		createNamespace(t, kube, "fr-a", "fr-org")
		createNamespace(t, kube, "fr-solo", "")
		createLabeledNamespace(t, kube, "fr-off", map[string]string{v1alpha1.LabelInherit: "false"}, nil)
		createLabeledNamespace(t, kube, "fr-excl", map[string]string{v1alpha1.LabelParent: "fr-org"},
			map[string]string{v1alpha1.AnnotationExclude: "rolebindings/fr-src"})
		putRoleBinding(t, kube, "fr-org", "fr-shadowed", "org:local", nil) // fr-org and its subtree shadow the hub's
	}
	// Only on member-1: a canary of the hub's candidate fr-src.next.
	createLabeledNamespace(t, kube1, "fr-canary", map[string]string{v1alpha1.LabelStage: "canary"}, nil)
	putRoleBinding(t, hubKube, globalNS, "fr-src", "org:src", nil)
	putRoleBinding(t, hubKube, globalNS, "fr-shadowed", "org:shadowed", nil)
	cand := putRoleBinding(t, hubKube, globalNS, "fr-src.next", "org:next", nil)
	cand.Annotations = map[string]string{v1alpha1.AnnotationCandidateFor: "fr-src", v1alpha1.AnnotationCanarySelector: v1alpha1.LabelStage + "=canary"}
	if _, err := hubKube.RbacV1().RoleBindings(globalNS).Update(t.Context(), cand, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()

	for _, m := range []struct {
		name string
		cp   *controlplane.ControlPlane
	}{{"member-1", member1}, {"member-2", member2}} {
		mc := reportMatches(t, m.name, m.cp, start)
		src, _ := sourceReport(mc, "fr-src")
		shadowed, _ := sourceReport(mc, "fr-shadowed")
		if src.Namespaces == mc.Status.Namespaces || shadowed.Namespaces == mc.Status.Namespaces || src.Namespaces == 0 {
			t.Errorf("%s: fr-src in %d, fr-shadowed in %d of %d namespaces: the test's exceptions should make them differ", m.name, src.Namespaces, shadowed.Namespaces, mc.Status.Namespaces)
		}
		if mc.Status.StaleSince != nil {
			t.Errorf("%s is stale since %v", m.name, mc.Status.StaleSince)
		}
		var found bool
		for _, c := range mc.Status.Candidates {
			if c.Name != "fr-src.next" {
				continue
			}
			found = true
			wantCanary := int32(0)
			if m.name == "member-1" {
				wantCanary = 1
			}
			if c.For != "fr-src" || !c.InCluster || c.CanaryNamespaces != wantCanary || c.StableNamespaces != src.Namespaces {
				t.Errorf("%s: candidate %+v; want for fr-src, in the cluster, %d canaries, %d stable", m.name, c, wantCanary, src.Namespaces)
			}
		}
		if !found {
			t.Errorf("%s: no report of the candidate fr-src.next: %+v", m.name, mc.Status.Candidates)
		}
	}

	t.Log("a hub edit: both members serve its revision")
	edited := putRoleBinding(t, hubKube, globalNS, "fr-src", "org:src", map[string]string{"edit": "1"})
	for _, name := range []string{"member-1", "member-2"} {
		waitReport(t, name, "the edit's revision "+edited.ResourceVersion, func(st fleetv1alpha1.MemberClusterStatus) error {
			if revisionOf(t, st.ServedRevision) < revisionOf(t, edited.ResourceVersion) {
				return fmt.Errorf("served revision %s", st.ServedRevision)
			}
			return nil
		})
	}

	t.Log("cutting member-2's sources off the hub; its reports go on, directly")
	relay.cut()
	healed := false
	t.Cleanup(func() {
		if !healed {
			relay.heal()
		}
	})
	stale := waitReport(t, "member-2", "staleSince", func(st fleetv1alpha1.MemberClusterStatus) error {
		if st.StaleSince == nil {
			return fmt.Errorf("not stale")
		}
		return nil
	})
	kept := stale.Status.ServedRevision
	t.Logf("member-2 stale since %s, serving %s", stale.Status.StaleSince.Format(time.RFC3339), kept)
	moved := putRoleBinding(t, hubKube, globalNS, "fr-src", "org:src", map[string]string{"edit": "2"})
	waitReport(t, "member-1", "the partition's edit", func(st fleetv1alpha1.MemberClusterStatus) error {
		if st.ServedRevision != moved.ResourceVersion {
			return fmt.Errorf("served revision %s, want %s", st.ServedRevision, moved.ResourceVersion)
		}
		return nil
	})
	before := memberCluster(t, "member-2").Status.ReportTime
	later := waitReport(t, "member-2", "two more reports while stale", func(st fleetv1alpha1.MemberClusterStatus) error {
		if st.ReportTime == nil || st.ReportTime.Sub(before.Time) < 2*reportInterval {
			return fmt.Errorf("last report %v", st.ReportTime)
		}
		return nil
	})
	if later.Status.ServedRevision != kept || later.Status.StaleSince == nil || !later.Status.StaleSince.Equal(stale.Status.StaleSince) {
		t.Errorf("member-2 while partitioned: revision %s, stale since %v; want %s, %v", later.Status.ServedRevision, later.Status.StaleSince, kept, stale.Status.StaleSince)
	}
	// What the hub's admin sees: stale, with the revision it still serves.
	if row := fleetRow(t, "member-2"); !strings.Contains(row, " Stale") || !strings.Contains(row, " "+kept+" ") {
		t.Errorf("kubectl implicit fleet status on the hub, member-2 partitioned: %q, want it Stale serving %s", row, kept)
	}

	t.Log("healing: member-2 serves the hub's latest revision, no longer stale")
	if err := relay.heal(); err != nil {
		t.Fatal(err)
	}
	healed = true
	waitReport(t, "member-2", "recovery", func(st fleetv1alpha1.MemberClusterStatus) error {
		if st.StaleSince != nil || st.ServedRevision != moved.ResourceVersion {
			return fmt.Errorf("stale since %v, revision %s (want %s)", st.StaleSince, st.ServedRevision, moved.ResourceVersion)
		}
		return nil
	})
	reportMatches(t, "member-2", member2, time.Now())
}

// createLabeledNamespace creates a namespace with labels and annotations.
func createLabeledNamespace(t *testing.T, kube kubernetes.Interface, name string, labels, annotations map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}
	if _, err := kube.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// memberClient is member's hub identity's dynamic client.
func memberClient(t *testing.T, name string) dynamic.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", memberKubeconfigs[name])
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// TestMemberIdentity: each member has read its registration's labels (its
// log says so); a member's hub identity reads its own MemberCluster (by a
// field selector) and writes its own status, and nothing else: not another
// member's status, not a new MemberCluster, not its labels.
func TestMemberIdentity(t *testing.T) {
	ctx := t.Context()
	for _, m := range []struct {
		srv         *controlplane.AggregatedServer
		name, stage string
	}{{implicit1, "member-1", "canary"}, {implicit2, "member-2", "main"}} {
		log, err := os.ReadFile(m.srv.LogPath())
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`"Fleet registration changed" member=%q registered=true labels="implicit.dev/cluster-stage=%s"`, m.name, m.stage)
		if !strings.Contains(string(log), want) {
			t.Errorf("%s's log does not say it read its registration: no %s", m.name, want)
		}
	}
	mcs := memberClient(t, "member-1").Resource(memberClusters)
	if _, err := mcs.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=member-1"}); err != nil {
		t.Errorf("member-1 lists its own MemberCluster by field selector: %v", err)
	}
	if _, err := mcs.List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("member-1 lists every MemberCluster: %v, want forbidden", err)
	}
	if _, err := mcs.Get(ctx, "member-2", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("member-1 reads member-2: %v, want forbidden", err)
	}
	status := []byte(`{"status":{"namespaces":999}}`)
	if _, err := mcs.Patch(ctx, "member-2", types.MergePatchType, status, metav1.PatchOptions{}, "status"); !apierrors.IsForbidden(err) {
		t.Errorf("member-1 patches member-2's status: %v, want forbidden", err)
	}
	other := memberCluster(t, "member-2")
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mcs.UpdateStatus(ctx, asUnstructured(u), metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("member-1 updates member-2's status: %v, want forbidden", err)
	}
	if _, err := mcs.Create(ctx, asUnstructured(map[string]any{
		"apiVersion": "fleet.implicit.dev/v1alpha1", "kind": "MemberCluster", "metadata": map[string]any{"name": "member-9"},
	}), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("member-1 registers member-9: %v, want forbidden", err)
	}
	relabel := []byte(`{"metadata":{"labels":{"implicit.dev/cluster-stage":"main"}}}`)
	if _, err := mcs.Patch(ctx, "member-1", types.MergePatchType, relabel, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("member-1 relabels itself: %v, want forbidden", err)
	}
	t.Log("a status write that carries labels: the status subresource ignores them")
	both := []byte(`{"metadata":{"labels":{"implicit.dev/cluster-stage":"main"}},"status":{"servedRevision":"1"}}`)
	if _, err := mcs.Patch(ctx, "member-1", types.MergePatchType, both, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("member-1 patches its own status: %v", err)
	}
	if got := memberCluster(t, "member-1").Labels["implicit.dev/cluster-stage"]; got != "canary" {
		t.Errorf("member-1's stage label after its status write: %q, want canary (the hub admin's)", got)
	}
	// The next report replaces the forged revision.
	waitReport(t, "member-1", "a real revision", func(st fleetv1alpha1.MemberClusterStatus) error {
		if st.ServedRevision == "1" {
			return fmt.Errorf("served revision still 1")
		}
		return nil
	})
}

func asUnstructured(m map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: m}
}

// TestStoppedMemberSilent: a member not registered yet logs what the hub's
// admin must create, and reports once registered; once stopped, its
// reportTime stops advancing.
func TestStoppedMemberSilent(t *testing.T) {
	const name = "member-3"
	if err := registerMemberIdentity(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	config, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := member1.StartAggregated(t.Context(), controlplane.AggregatedServerOptions{
		Binary: os.Getenv("IMPLICIT_BINARY"), Name: "implicit-member-3",
		Args: []string{"--global-kubeconfig=" + memberKubeconfigs[name], "--global-cluster-name=hub", "--webhook-configuration=",
			"--config=" + config + "/testdata/implicit-config.yaml",
			"--fleet-member-name=" + name, "--fleet-report-interval=" + reportInterval.String()},
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			srv.Stop()
		}
	})
	err = wait.PollUntilContextTimeout(t.Context(), 300*time.Millisecond, converge, true, func(context.Context) (bool, error) {
		return strings.Contains(srv.LogTail(200), `member cluster \"member-3\" is not registered on the hub: the hub's admin must create MemberCluster member-3`), nil
	})
	if err != nil {
		t.Fatalf("no log of the missing registration: %v\n%s", err, srv.LogTail(20))
	}
	if err := registerMemberCluster(t.Context(), name, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, hubDyn := clients(t, hub)
		hubDyn.Resource(memberClusters).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	registered := time.Now()
	first := waitReport(t, name, "a report", func(st fleetv1alpha1.MemberClusterStatus) error {
		if st.ReportTime == nil || st.ServedRevision == "" {
			return fmt.Errorf("report %+v", st)
		}
		return nil
	})
	if first.Status.ReportTime.Sub(registered) > 2*reportInterval+time.Second {
		t.Errorf("first report at %v, %v after the registration: want within two intervals", first.Status.ReportTime, first.Status.ReportTime.Sub(registered))
	}
	waitReport(t, name, "a later report", func(st fleetv1alpha1.MemberClusterStatus) error {
		if !st.ReportTime.After(first.Status.ReportTime.Time) {
			return fmt.Errorf("report time %v", st.ReportTime)
		}
		return nil
	})
	t.Log("stopping member-3's implicit-apiserver")
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped = true
	last := memberCluster(t, name).Status.ReportTime
	time.Sleep(3 * reportInterval) // on purpose: three intervals of silence
	if now := memberCluster(t, name).Status.ReportTime; !now.Equal(last) {
		t.Errorf("report time moved from %v to %v after the member stopped", last, now)
	}
	// What the hub's admin sees: silent, with the revision it last served.
	served := memberCluster(t, name).Status.ServedRevision
	if row := fleetRow(t, name, "--silent-after="+(2*reportInterval).String()); !strings.Contains(row, " Silent") || !strings.Contains(row, " "+served+" ") {
		t.Errorf("kubectl implicit fleet status on the hub, %s stopped: %q, want it Silent at revision %s", name, row, served)
	}
}

// TestUnreportedMember: a registered member that never reported has no
// last-report series on the hub (ImplicitFleetMemberSilent can't see it):
// the hub's implicit-apiserver says so in implicit_fleet_member_unreported
// (1, and 0 for a member that reports), and fleet status shows it
// Unreported.
func TestUnreportedMember(t *testing.T) {
	const name = "member-never"
	if err := registerMemberCluster(t.Context(), name, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, hubDyn := clients(t, hub)
		hubDyn.Resource(memberClusters).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	series := func(metric, member string) string {
		return seriesOf(t, hub, hubImplicit, metric, `cluster="`+member+`"`)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, converge, true, func(context.Context) (bool, error) {
		return series("implicit_fleet_member_unreported", name) == "1", nil
	})
	if err != nil {
		t.Fatalf("implicit_fleet_member_unreported{cluster=%q} = %q on the hub, want 1", name, series("implicit_fleet_member_unreported", name))
	}
	t.Log("the hub says member-never is unreported")
	if v := series("implicit_fleet_member_last_report_timestamp_seconds", name); v != "" {
		t.Errorf("a last report time %s for a member that never reported", v)
	}
	if v := series("implicit_fleet_member_unreported", "member-1"); v != "0" {
		t.Errorf("implicit_fleet_member_unreported{cluster=\"member-1\"} = %q, want 0 for a member that reports", v)
	}
	if row := fleetRow(t, name); !strings.Contains(row, " Unreported") {
		t.Errorf("kubectl implicit fleet status on the hub: %q, want %s Unreported", row, name)
	}
	t.Log("fleet status shows it Unreported; deleting its registration")
	_, hubDyn := clients(t, hub)
	if err := hubDyn.Resource(memberClusters).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, converge, true, func(context.Context) (bool, error) {
		return series("implicit_fleet_member_unreported", name) == "", nil
	})
	if err != nil {
		t.Errorf("the deleted member's series stays: %v", err)
	}
}

// fleetRow is member's row of `kubectl implicit fleet status` on the hub,
// blanks squeezed.
func fleetRow(t *testing.T, member string, args ...string) string {
	t.Helper()
	out := hubPlugin(t, append([]string{"fleet", "status"}, args...)...)
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 0 && f[0] == member {
			return squeeze(line)
		}
	}
	t.Fatalf("kubectl implicit fleet status on the hub has no row of %s:\n%s", member, out)
	return ""
}
