package materialize

import (
	"context"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// sources: a global default-deny and a global web policy; org's web policy
// (nearer than the global one for team-a); team-a's own policy.
func sources() []*networkingv1.NetworkPolicy {
	return []*networkingv1.NetworkPolicy{
		netpol(global, "default-deny", "all", "10"),
		netpol(global, "web", "global-web", "11"),
		netpol("org", "web", "org-web", "12"),
		netpol("team-a", "mine", "mine", "13"),
	}
}

// copyOf describes a copy: the source namespace, scope and the app its
// pod selector selects.
type copyOf struct{ source, scope, app string }

func describeCopies(t *testing.T, objs map[string]*unstructured.Unstructured) (copies map[string]copyOf, own []string) {
	t.Helper()
	copies = map[string]copyOf{}
	for name, o := range objs {
		app, _, _ := unstructured.NestedString(o.Object, "spec", "podSelector", "matchLabels", "app")
		if !v1alpha1.IsMaterialized(o.GetLabels()) {
			own = append(own, name)
			continue
		}
		copies[name] = copyOf{o.GetLabels()[v1alpha1.LabelSourceNamespace], o.GetLabels()[v1alpha1.LabelScope], app}
	}
	slices.Sort(own)
	return copies, own
}

func TestReconcile(t *testing.T) {
	tests := []struct {
		name      string
		unsynced  bool
		namespace string
		host      []*networkingv1.NetworkPolicy
		// wantCopies and wantOwn describe the namespace's objects after.
		wantCopies map[string]copyOf
		wantOwn    []string
		wantWrites []string
		// wantDrift and wantConflicts are the metrics' increments.
		wantDrift, wantConflicts float64
	}{{
		name:      "inherited items become copies; a parent's item wins over the global one; local items are left alone",
		namespace: "team-a",
		host:      []*networkingv1.NetworkPolicy{netpol("team-a", "mine", "mine", "13")},
		wantCopies: map[string]copyOf{
			"default-deny": {global, "global", "all"},
			"web":          {"org", "parent", "org-web"},
		},
		wantOwn:    []string{"mine"},
		wantWrites: []string{"create team-a/default-deny", "create team-a/web"},
	}, {
		name:       "a namespace without a parent inherits the global items",
		namespace:  "team-b",
		wantCopies: map[string]copyOf{"default-deny": {global, "global", "all"}, "web": {global, "global", "global-web"}},
		wantWrites: []string{"create team-b/default-deny", "create team-b/web"},
	}, {
		name:       "an excluded namespace gets none, and a copy found there is deleted",
		namespace:  "kube-system",
		host:       []*networkingv1.NetworkPolicy{staleCopy("kube-system", global, "default-deny", "all", "10")},
		wantCopies: map[string]copyOf{},
		wantWrites: []string{"delete kube-system/default-deny"},
	}, {
		name:       "the global namespace gets none",
		namespace:  global,
		wantCopies: map[string]copyOf{},
		wantOwn:    nil,
	}, {
		name:      "a copy whose item left the view is deleted",
		namespace: "team-b",
		host: []*networkingv1.NetworkPolicy{
			staleCopy("team-b", global, "default-deny", "all", "10"),
			staleCopy("team-b", global, "web", "global-web", "11"),
			staleCopy("team-b", global, "gone", "x", "3"),
		},
		wantCopies: map[string]copyOf{"default-deny": {global, "global", "all"}, "web": {global, "global", "global-web"}},
		wantWrites: []string{"delete team-b/gone"},
	}, {
		name:      "a copy of an older source version is written again, no drift",
		namespace: "team-b",
		host: []*networkingv1.NetworkPolicy{
			staleCopy("team-b", global, "default-deny", "old-app", "9"),
			staleCopy("team-b", global, "web", "global-web", "11"),
		},
		wantCopies: map[string]copyOf{"default-deny": {global, "global", "all"}, "web": {global, "global", "global-web"}},
		wantWrites: []string{"update team-b/default-deny"},
	}, {
		name:      "a copy changed behind the guards is repaired and counted",
		namespace: "team-b",
		host: []*networkingv1.NetworkPolicy{
			staleCopy("team-b", global, "default-deny", "tampered", "10"),
			staleCopy("team-b", global, "web", "global-web", "11"),
		},
		wantCopies: map[string]copyOf{"default-deny": {global, "global", "all"}, "web": {global, "global", "global-web"}},
		wantWrites: []string{"update team-b/default-deny"},
		wantDrift:  1,
	}, {
		name:      "a tenant object holding an inherited name is never overwritten, and reported",
		namespace: "team-b",
		host: []*networkingv1.NetworkPolicy{
			tenantObject("team-b", "default-deny"),
		},
		wantCopies:    map[string]copyOf{"web": {global, "global", "global-web"}},
		wantOwn:       []string{"default-deny"},
		wantWrites:    []string{"create team-b/web"},
		wantConflicts: 1,
	}, {
		name:      "fail-static: before the sources are read nothing is written or deleted",
		unsynced:  true,
		namespace: "team-b",
		host: []*networkingv1.NetworkPolicy{
			staleCopy("team-b", global, "gone", "x", "3"),
		},
		wantCopies: map[string]copyOf{"gone": {global, "global", "x"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Not parallel: the metrics are global.
			objs := make([]runtime.Object, 0, len(tt.host))
			for _, o := range tt.host {
				objs = append(objs, o)
			}
			host := newFakeHost(t, objs...)
			rec := record.NewFakeRecorder(10)
			rec.IncludeObject = true
			m := New(newMux(tt.unsynced, sources()...), host, []kinds.Kind{npKind}, rec, Options{})
			drift0 := counter(t, driftRepaired.WithLabelValues("networkpolicies"))
			conflicts0 := counter(t, conflicts.WithLabelValues("networkpolicies"))

			n, err := m.reconcile(context.Background(), tt.namespace, host.list(t))
			if err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			got := host.takeWrites()
			if n != len(got) {
				t.Errorf("reconcile reports %d writes, the host saw %v", n, got)
			}
			if !slices.Equal(got, tt.wantWrites) {
				t.Errorf("writes %q, want %q", got, tt.wantWrites)
			}
			copies, own := describeCopies(t, host.objects(t, tt.namespace))
			if !mapsEqual(copies, tt.wantCopies) {
				t.Errorf("copies %v, want %v", copies, tt.wantCopies)
			}
			if !slices.Equal(own, tt.wantOwn) {
				t.Errorf("the namespace's own objects %v, want %v", own, tt.wantOwn)
			}
			for name, o := range host.objects(t, tt.namespace) {
				if v1alpha1.IsMaterialized(o.GetLabels()) && tt.wantCopies[name].source != "" {
					want := "uid-" + tt.wantCopies[name].source + "-" + name
					if got := o.GetAnnotations()[v1alpha1.AnnotationSourceUID]; got != want {
						t.Errorf("copy %s: source uid %q, want %q", name, got, want)
					}
				}
			}
			if own := host.objects(t, tt.namespace)["mine"]; own != nil && v1alpha1.IsMaterialized(own.GetLabels()) {
				t.Errorf("the local item was turned into a copy: %v", own.Object)
			}
			if d := counter(t, driftRepaired.WithLabelValues("networkpolicies")) - drift0; d != tt.wantDrift {
				t.Errorf("drift repaired +%v, want +%v", d, tt.wantDrift)
			}
			if d := counter(t, conflicts.WithLabelValues("networkpolicies")) - conflicts0; d != tt.wantConflicts {
				t.Errorf("conflicts +%v, want +%v", d, tt.wantConflicts)
			}
			// Each conflict is an Event on the tenant's own object.
			var events []string
			for len(rec.Events) > 0 {
				events = append(events, <-rec.Events)
			}
			if len(events) != int(tt.wantConflicts) {
				t.Errorf("events %q, want %v", events, tt.wantConflicts)
			}
			for _, e := range events {
				if !strings.HasPrefix(e, "Warning MaterializeConflict ") || !strings.Contains(e, "kind=NetworkPolicy,apiVersion=networking.k8s.io/v1") {
					t.Errorf("event %q: want a Warning MaterializeConflict on the NetworkPolicy", e)
				}
			}

			// A second pass over the same state writes nothing: the
			// copies are what the view says.
			if _, err := m.reconcile(context.Background(), tt.namespace, host.list(t)); err != nil {
				t.Fatalf("second reconcile: %v", err)
			}
			if again := host.takeWrites(); len(again) != 0 {
				t.Errorf("second reconcile wrote %q, want nothing", again)
			}
		})
	}
}

// TestReconcileDeletedCopyIsDrift: a copy the materializer saw, deleted
// while its source is unchanged, is recreated and counted as drift.
func TestReconcileDeletedCopyIsDrift(t *testing.T) {
	host := newFakeHost(t)
	m := New(newMux(false, sources()...), host, []kinds.Kind{npKind}, nil, Options{})
	if _, err := m.reconcile(context.Background(), "team-b", host.list(t)); err != nil {
		t.Fatal(err)
	}
	c := host.objects(t, "team-b")["default-deny"]
	if c == nil {
		t.Fatal("no copy of default-deny")
	}
	// What the copies' informer would record.
	m.seen[copyKey{"networkpolicies", "team-b", "default-deny"}] = sourceVersion(c)
	if err := host.Tracker().Delete(npGVR, "team-b", "default-deny"); err != nil {
		t.Fatal(err)
	}
	host.takeWrites()
	drift0 := counter(t, driftRepaired.WithLabelValues("networkpolicies"))
	if _, err := m.reconcile(context.Background(), "team-b", host.list(t)); err != nil {
		t.Fatal(err)
	}
	if got := host.takeWrites(); !slices.Equal(got, []string{"create team-b/default-deny"}) {
		t.Errorf("writes %q, want the copy created again", got)
	}
	if d := counter(t, driftRepaired.WithLabelValues("networkpolicies")) - drift0; d != 1 {
		t.Errorf("drift repaired +%v, want +1", d)
	}
}

func TestDesiredCopy(t *testing.T) {
	t.Parallel()
	item := netpol("team-b", "default-deny", "all", "42")
	item.Labels = map[string]string{"team": "x", v1alpha1.LabelScope: "global", v1alpha1.LabelSourceNamespace: global}
	item.Annotations = map[string]string{v1alpha1.AnnotationSourceUID: "u", "kubectl.kubernetes.io/last-applied-configuration": "{}"}
	item.ManagedFields = nil
	c, ok, err := desiredCopy(npKind, "team-b", item)
	if err != nil || !ok {
		t.Fatalf("desiredCopy: %v, %v", ok, err)
	}
	if c.GetAPIVersion() != "networking.k8s.io/v1" || c.GetKind() != "NetworkPolicy" {
		t.Errorf("apiVersion/kind %s/%s", c.GetAPIVersion(), c.GetKind())
	}
	if c.GetUID() != "" || c.GetResourceVersion() != "" {
		t.Errorf("the copy keeps the item's uid %q or resourceVersion %q", c.GetUID(), c.GetResourceVersion())
	}
	if _, has := c.Object["metadata"].(map[string]any)["creationTimestamp"]; has {
		t.Error("the copy keeps a creationTimestamp")
	}
	wantLabels := map[string]string{"team": "x", v1alpha1.LabelScope: "global", v1alpha1.LabelSourceNamespace: global, v1alpha1.LabelMaterialized: "true"}
	if !mapsEqual(c.GetLabels(), wantLabels) {
		t.Errorf("labels %v, want %v", c.GetLabels(), wantLabels)
	}
	if !mapsEqual(c.GetAnnotations(), map[string]string{v1alpha1.AnnotationSourceUID: "u"}) {
		t.Errorf("annotations %v, want the provenance only", c.GetAnnotations())
	}

	local := netpol("team-b", "mine", "x", "1")
	local.Labels = map[string]string{v1alpha1.LabelScope: "local"}
	if _, ok, _ := desiredCopy(npKind, "team-b", local); ok {
		t.Error("a local item has a copy")
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func counter(t *testing.T, c metrics.CounterMetric) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(c)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
