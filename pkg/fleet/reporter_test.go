package fleet_test

import (
	"context"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/fleet"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

func TestMain(m *testing.M) {
	fleet.RegisterMetrics(legacyregistry.MustRegister)
	m.Run()
}

const global = "implicit-global"

// errNotSynced is a mux's error before it has synced.
var errNotSynced = func() error {
	_, err := watchmux.New(merge.Policy{GlobalNamespace: global}, nil, nil, watchmux.Options{}).GlobalReach()
	return err
}()

// fakeMirror is a member's views as the reporter reads them: the hub's
// items with their counts, changed by the test.
type fakeMirror struct {
	mu     sync.Mutex
	reach  watchmux.GlobalReach
	synced bool
	next   chan struct{}
	// armed counts the reporter's calls of NextChange.
	armed int
}

func newFakeMirror() *fakeMirror { return &fakeMirror{next: make(chan struct{})} }

func (f *fakeMirror) GlobalReach() (watchmux.GlobalReach, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.synced {
		return watchmux.GlobalReach{}, errNotSynced
	}
	return f.reach, nil
}

func (f *fakeMirror) Read(fn func(watchmux.Reader)) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.synced {
		return "", errNotSynced
	}
	fn(fakeReader{items: f.reach.Items})
	return "1", nil
}

func (f *fakeMirror) NextChange() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed++
	return f.next
}

// waitArmed waits until the reporter has called NextChange n times: it
// follows the changes after the one it last handled.
func (f *fakeMirror) waitArmed(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		armed := f.armed
		f.mu.Unlock()
		if armed >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reporter called NextChange %d times, want %d", armed, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// set replaces the mirror's reach and signals a change.
func (f *fakeMirror) set(r watchmux.GlobalReach) {
	f.mu.Lock()
	f.reach, f.synced = r, true
	close(f.next)
	f.next = make(chan struct{})
	f.mu.Unlock()
}

// fakeReader answers the reads of the reporter's fingerprint only.
type fakeReader struct {
	watchmux.Reader
	items []watchmux.GlobalItemReach
}

func (r fakeReader) Resources() []string           { return []string{"rolebindings"} }
func (r fakeReader) Serves(string) bool            { return true }
func (r fakeReader) GlobalNamespace(string) string { return global }
func (r fakeReader) SourcesIn(_, _ string) []merge.Item {
	var out []merge.Item
	for _, it := range r.items {
		out = append(out, it.Item)
	}
	return out
}

// hubItem is a hub RoleBinding at rv, a candidate for forName when set.
func hubItem(name, rv, forName string, annotations map[string]string) merge.Item {
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: global, Name: name, ResourceVersion: rv, Annotations: annotations}}
	it := merge.Item{Namespace: global, Name: name, Cluster: "hub", Object: rb}
	if forName != "" {
		ann := map[string]string{v1alpha1.AnnotationCandidateFor: forName, v1alpha1.AnnotationCanarySelector: v1alpha1.LabelStage + "=canary"}
		for k, v := range annotations {
			ann[k] = v
		}
		c, err := merge.ParseCandidate(name, ann)
		if err != nil {
			panic(err)
		}
		// As the mux marks it in a member registered as a main cluster.
		it.Candidate = c.InCluster(true, labels.Set{"implicit.dev/cluster-stage": "main"})
	}
	return it
}

func reachOf(tenants int, items ...watchmux.GlobalItemReach) watchmux.GlobalReach {
	return watchmux.GlobalReach{Tenants: tenants, Items: items}
}

var memberGVR = fleetv1alpha1.GroupVersionResource

func memberCluster(name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(fleetv1alpha1.GroupVersionKind)
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

func newClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{memberGVR: fleetv1alpha1.Kind + "List"}, objs...)
}

// status reads member's status from client.
func status(t *testing.T, client *dynamicfake.FakeDynamicClient, name string) (fleetv1alpha1.MemberClusterStatus, map[string]string) {
	t.Helper()
	u, err := client.Resource(memberGVR).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mc fleetv1alpha1.MemberCluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &mc); err != nil {
		t.Fatal(err)
	}
	return mc.Status, mc.Labels
}

// patches counts the status patches client received.
func patches(client *dynamicfake.FakeDynamicClient) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			n++
		}
		if a.GetVerb() == "create" {
			panic("the reporter created an object: " + a.GetResource().String())
		}
	}
	return n
}

type harness struct {
	clock  *clocktesting.FakeClock
	mirror *fakeMirror
	client *dynamicfake.FakeDynamicClient
	stale  struct {
		sync.Mutex
		since time.Time
	}
	cancel func()
	done   chan struct{}
}

func start(t *testing.T, client *dynamicfake.FakeDynamicClient, mirror *fakeMirror) *harness {
	t.Helper()
	h := &harness{clock: clocktesting.NewFakeClock(time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)), mirror: mirror, client: client, done: make(chan struct{})}
	r := fleet.NewReporter(fleet.ReporterOptions{
		Name: "member-1", Client: client, Mirror: mirror, Interval: 30 * time.Second, Clock: h.clock,
		Groups: map[string]string{"rolebindings": "rbac.authorization.k8s.io"},
		Stale: func() (time.Time, bool) {
			h.stale.Lock()
			defer h.stale.Unlock()
			return h.stale.since, !h.stale.since.IsZero()
		},
		AuditDifferences: func(ns, name string) int64 {
			if ns == global && name == "g.next" {
				return 7
			}
			return 0
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		defer close(h.done)
		r.Run(ctx)
	}()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	h.cancel()
	<-h.done
}

// waitPatches waits until client has received n status patches.
func (h *harness) waitPatches(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for patches(h.client) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d status patches, want %d", patches(h.client), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settle waits until the reporter waits on n timers and tickers of the
// clock: its ticker, and its settle timer once it has seen a change.
func (h *harness) settle(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.clock.Waiters() != n {
		if time.Now().After(deadline) {
			t.Fatalf("the reporter waits on %d timers, want %d", h.clock.Waiters(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestReporter reports at once, every interval, and soon after a change of
// the hub's items, never twice within MinReportGap; staleness comes and
// goes; the labels are never written.
func TestReporter(t *testing.T) {
	client := newClient(memberCluster("member-1", map[string]string{"implicit.dev/cluster-stage": "canary"}))
	mirror := newFakeMirror()
	mirror.set(reachOf(40,
		watchmux.GlobalItemReach{Resource: "rolebindings", Item: hubItem("g", "120", "", nil), Namespaces: 37},
		watchmux.GlobalItemReach{Resource: "rolebindings", Item: hubItem("g.next", "131", "g", nil), Namespaces: 2, Stable: 37},
		watchmux.GlobalItemReach{Resource: "rolebindings", Item: hubItem("h.next", "90", "h",
			map[string]string{v1alpha1.AnnotationCanaryClusters: "implicit.dev/cluster-stage=canary"}), Namespaces: 0, Stable: 40},
		watchmux.GlobalItemReach{Resource: "rolebindings", Item: merge.Item{Namespace: global, Name: "local"}, Namespaces: 40}, // not the hub's
	))
	h := start(t, client, mirror)
	h.waitPatches(t, 1)
	st, labels := status(t, client, "member-1")
	if st.ReportTime == nil || !st.ReportTime.Time.Equal(h.clock.Now()) || st.ServedRevision != "131" || st.Namespaces != 40 || st.StaleSince != nil {
		t.Errorf("first report: %+v; want reported now, revision 131, 40 namespaces, not stale", st)
	}
	if len(st.Sources) != 1 || st.Sources[0] != (fleetv1alpha1.SourceReport{Resource: "rolebindings.rbac.authorization.k8s.io", Name: "g", ResourceVersion: "120", Namespaces: 37}) {
		t.Errorf("sources: %+v; want g only (local is no hub item)", st.Sources)
	}
	wantCandidates := []fleetv1alpha1.CandidateReport{
		{Resource: "rolebindings.rbac.authorization.k8s.io", Name: "g.next", For: "g", ResourceVersion: "131", InCluster: true, CanaryNamespaces: 2, StableNamespaces: 37, AuditDifferences: 7},
		{Resource: "rolebindings.rbac.authorization.k8s.io", Name: "h.next", For: "h", ResourceVersion: "90", InCluster: false, StableNamespaces: 40},
	}
	if len(st.Candidates) != 2 || st.Candidates[0] != wantCandidates[0] || st.Candidates[1] != wantCandidates[1] {
		t.Errorf("candidates: %+v\nwant %+v", st.Candidates, wantCandidates)
	}
	if labels["implicit.dev/cluster-stage"] != "canary" {
		t.Errorf("labels after a report: %v, want the registered ones", labels)
	}

	// The interval.
	h.settle(t, 1)
	t0 := h.clock.Now()
	h.clock.Step(30 * time.Second)
	h.waitPatches(t, 2)
	if st, _ := status(t, client, "member-1"); !st.ReportTime.Time.Equal(h.clock.Now()) {
		t.Errorf("report time %v after the interval, want %v", st.ReportTime, h.clock.Now())
	}

	// A hub edit just after a report, while the hub is stale: reported
	// MinReportGap after the last report, not before.
	h.setStale(t0.Add(20 * time.Second))
	mirror.waitArmed(t, 1)
	mirror.set(reachOf(40, watchmux.GlobalItemReach{Resource: "rolebindings", Item: hubItem("g", "150", "", nil), Namespaces: 38}))
	h.settle(t, 2) // the ticker and the settle timer
	h.clock.Step(fleet.MinReportGap - time.Millisecond)
	if n := patches(client); n != 2 {
		t.Fatalf("%d patches within %s of a report, want 2", n, fleet.MinReportGap)
	}
	h.clock.Step(time.Millisecond)
	h.waitPatches(t, 3)
	st, _ = status(t, client, "member-1")
	if !st.ReportTime.Time.Equal(h.clock.Now()) || st.ServedRevision != "150" || st.StaleSince == nil || !st.StaleSince.Time.Equal(t0.Add(20*time.Second)) ||
		len(st.Sources) != 1 || st.Sources[0].Namespaces != 38 || len(st.Candidates) != 0 {
		t.Errorf("report after the edit: %+v; want now, revision 150, stale since %v, g in 38 namespaces, no candidates", st, t0.Add(20*time.Second))
	}

	// A change of the mirror that keeps the hub's revisions: no report.
	mirror.waitArmed(t, 2)
	h.settle(t, 1)
	mirror.set(mirror.reach)
	h.settle(t, 2)
	h.clock.Step(fleet.MinReportGap)
	mirror.waitArmed(t, 3)
	// Back in its loop (a timer armed for the next change): the change
	// before was handled.
	mirror.set(mirror.reach)
	h.settle(t, 2)
	if n := patches(client); n != 3 {
		t.Fatalf("%d patches after a change that kept the hub's revisions, want 3", n)
	}

	// Recovered: staleSince goes at the next report.
	h.setStale(time.Time{})
	h.clock.SetTime(t0.Add(60 * time.Second))
	h.waitPatches(t, 4)
	if st, _ := status(t, client, "member-1"); st.StaleSince != nil || !st.ReportTime.Time.Equal(t0.Add(60*time.Second)) {
		t.Errorf("report after recovery: %+v; want not stale, at %v", st, t0.Add(60*time.Second))
	}
}

func (h *harness) setStale(since time.Time) {
	h.stale.Lock()
	h.stale.since = since
	h.stale.Unlock()
}

// TestReporterNotRegistered retries a member the hub's admin has not
// registered, counts the failures, and never creates its MemberCluster.
func TestReporterNotRegistered(t *testing.T) {
	failures := func() float64 {
		v, err := testutil.GetCounterMetricValue(fleet.ReportFailures("not_registered"))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := failures()
	client := newClient()
	mirror := newFakeMirror() // not synced: a report says nothing yet
	h := start(t, client, mirror)
	h.waitPatches(t, 1)
	h.settle(t, 1)
	h.clock.Step(30 * time.Second)
	h.waitPatches(t, 2)
	deadline := time.Now().Add(10 * time.Second)
	for failures()-before != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%v not_registered failures, want 2", failures()-before)
		}
		time.Sleep(2 * time.Millisecond)
	}
	// Registered by the hub's admin: the next report lands.
	if _, err := client.Resource(memberGVR).Create(context.Background(), memberCluster("member-1", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	h.settle(t, 1)
	h.clock.Step(30 * time.Second)
	h.waitPatches(t, 1)
	st, _ := status(t, client, "member-1")
	if st.ReportTime == nil || st.ServedRevision != "" || st.Namespaces != 0 || len(st.Sources) != 0 {
		t.Errorf("report of an unsynced member: %+v; want a time and nothing else", st)
	}
}
