package watchmux_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// reachOracle counts GlobalReach's figures the long way: every tenant's
// whole view merged, one by one, and for a staged creation every tenant's
// view as the created source would leave it.
func reachOracle(t testing.TB, m *watchmux.Mux) (tenants int, counts map[string]string) {
	t.Helper()
	counts = map[string]string{}
	if _, err := m.Read(func(r watchmux.Reader) {
		sources, canaries := map[string]int{}, map[string]int{}
		items := r.SourcesIn(rolebindings, global)
		for _, ns := range r.Namespaces() {
			n, _ := r.Namespace(ns)
			if !r.Policy().IsTenant(n) {
				continue
			}
			tenants++
			for _, res := range r.Results(rolebindings, ns, "") {
				for _, it := range append([]merge.Item{res.Item}, res.Overlays...) {
					if it.Namespace != global {
						continue
					}
					if it.FromCandidate != "" {
						canaries[it.FromCandidate]++
					} else {
						sources[it.Name]++
					}
					break
				}
			}
		}
		for _, it := range items {
			if it.Candidate == nil {
				counts[it.Name] = fmt.Sprint(sources[it.Name])
				continue
			}
			stable := 0
			if it.Candidate.For != "" {
				if s, ok := r.Source(rolebindings, global, it.Candidate.For); ok && s.Candidate == nil {
					stable = sources[it.Candidate.For]
				} else {
					created := it
					created.Name, created.Candidate = it.Candidate.For, nil
					for _, ns := range r.Namespaces() {
						if n, _ := r.Namespace(ns); !r.Policy().IsTenant(n) {
							continue
						}
						rs := r.ResultsAfter(rolebindings, ns, watchmux.Edit{Namespace: global, Name: created.Name, Item: &created})
						if len(rs) > 0 && rs[0].Item.Namespace == global && rs[0].Item.FromCandidate == "" {
							stable++
						}
					}
				}
			}
			counts[it.Name] = fmt.Sprintf("canary=%d stable=%d", canaries[it.Name], stable)
		}
	}); err != nil {
		t.Fatal(err)
	}
	return tenants, counts
}

// reachCounts renders GlobalReach as reachOracle does.
func reachCounts(t testing.TB, m *watchmux.Mux) (int, map[string]string) {
	t.Helper()
	got, err := m.GlobalReach()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range got.Items {
		if r.Resource != rolebindings {
			t.Fatalf("resource %q: only %s is served", r.Resource, rolebindings)
		}
		if r.Item.Candidate == nil {
			out[r.Item.Name] = fmt.Sprint(r.Namespaces)
		} else {
			out[r.Item.Name] = fmt.Sprintf("canary=%d stable=%d", r.Namespaces, r.Stable)
		}
	}
	return got.Tenants, out
}

// TestGlobalReachExample: shadows, exclusions, a lock, stages and a
// candidate make each global item's count differ from the tenants'.
func TestGlobalReachExample(t *testing.T) {
	t.Parallel()
	m := newMux(watchmux.Options{})
	if _, err := m.GlobalReach(); !watchmux.IsNotSynced(err) {
		t.Fatalf("GlobalReach before sync: %v, want not synced", err)
	}
	for _, s := range staged(
		addNS(namespace("team-c", parent("org"), exclude("rolebindings/g"))),
		addNS(namespace("kube-system")),
		addNS(namespace("off", noInherit)),
		putRB(global, "h"),
		putRB("org", "h"), // shadows h for org and its subtree
		putRB(global, "l", locked),
		putRB("solo", "l"), // a lock keeps l
		putRB(global, "new.next", candidateFor("new", v1alpha1.LabelStage+"=canary")), // a staged creation
	) {
		s(m)
	}
	m.MarkSynced()
	tenants, got := reachCounts(t, m)
	// Tenants: org, team-a (canary), team-b, team-a-1, solo, team-c.
	want := map[string]string{
		"g":        "4",                 // not team-a (canary), team-c (excludes it)
		"g.next":   "canary=1 stable=4", // team-a
		"h":        "1",                 // solo: org's subtree shadows it
		"l":        "6",
		"new.next": "canary=1 stable=5",
	}
	if tenants != 6 || !maps.Equal(got, want) {
		t.Errorf("GlobalReach: %d tenants, %v; want 6, %v", tenants, got, want)
	}
	oTenants, oracle := reachOracle(t, m)
	if oTenants != tenants || !maps.Equal(oracle, got) {
		t.Errorf("GlobalReach: %d tenants, %v; the views say %d, %v", tenants, got, oTenants, oracle)
	}
}

// TestGlobalReachFollowsViews checks GlobalReach against the views along
// the random changes of the property test's world.
func TestGlobalReachFollowsViews(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{11, 12, 13, 14} {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			t.Parallel()
			w := newWorld(seed)
			m := newMux(watchmux.Options{BufferSize: 10_000})
			var log []string
			for range 40 {
				log = append(log, w.step(m))
			}
			m.MarkSynced()
			for i := range 300 {
				log = append(log, w.step(m))
				if i%3 != 0 {
					continue
				}
				tenants, got := reachCounts(t, m)
				oTenants, want := reachOracle(t, m)
				if tenants != oTenants || !maps.Equal(got, want) {
					t.Fatalf("after step %d: GlobalReach %d tenants %v, the views say %d %v\nsteps:\n%s", i, tenants, got, oTenants, want, strings.Join(log, "\n"))
				}
			}
		})
	}
}

// BenchmarkGlobalReach measures a member's report count: 10,101 namespaces
// (100 orgs × 100 children, plus the orgs), 100 global RoleBindings, and
// 1,000 exceptions (100 children excluding one global each, 100 shadowing
// one, and a global candidate for 10 of them staged to 100 canaries).
//
//	go test -run '^$' -bench GlobalReach -benchtime 10x ./pkg/watchmux/
func BenchmarkGlobalReach(b *testing.B) {
	m := benchMuxOf(benchSizes[0])
	for i := range 100 {
		o, c := i, 1
		m.OnNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:        benchChild(o, c),
			Labels:      map[string]string{v1alpha1.LabelParent: fmt.Sprintf("org-%03d", o)},
			Annotations: map[string]string{v1alpha1.AnnotationExclude: fmt.Sprintf("rolebindings/global-%d", i)},
		}}, false)
		m.OnNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:   benchChild(o, 2),
			Labels: map[string]string{v1alpha1.LabelParent: fmt.Sprintf("org-%03d", o), v1alpha1.LabelStage: "canary"},
		}}, false)
		m.OnSource(rolebindings, benchRB(benchChild(o, 3), fmt.Sprintf("global-%d", (i+1)%100), 2), false)
	}
	for g := range 10 {
		rb := benchRB(global, fmt.Sprintf("global-%d.next", g), 3)
		rb.Annotations = map[string]string{
			v1alpha1.AnnotationCandidateFor:   fmt.Sprintf("global-%d", g),
			v1alpha1.AnnotationCanarySelector: v1alpha1.LabelStage + "=canary",
		}
		m.OnSource(rolebindings, rb, false)
	}
	var got watchmux.GlobalReach
	var longest time.Duration
	for b.Loop() {
		start := time.Now()
		var err error
		if got, err = m.GlobalReach(); err != nil {
			b.Fatal(err)
		}
		longest = max(longest, time.Since(start))
	}
	if len(got.Items) != 110 {
		b.Fatalf("%d items, want 110", len(got.Items))
	}
	b.ReportMetric(float64(got.Tenants), "tenants")
	b.ReportMetric(float64(len(got.Items)), "items")
	b.ReportMetric(float64(longest.Microseconds())/1000, "max-ms")
}
