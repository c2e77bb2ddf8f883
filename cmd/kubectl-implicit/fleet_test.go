package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
)

var fleetNow = time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)

func rbReport(name, rv string, namespaces int32) fleetv1alpha1.SourceReport {
	return fleetv1alpha1.SourceReport{Resource: "rolebindings.rbac.authorization.k8s.io", Name: name, ResourceVersion: rv, Namespaces: namespaces}
}

// writtenAt sets u's last write (managedFields) to t.
func writtenAt(u *unstructured.Unstructured, t time.Time) *unstructured.Unstructured {
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate, Time: &metav1.Time{Time: t}}})
	return u
}

func rbResolver(schema.GroupResource) (schema.GroupVersionResource, error) { return rbSource, nil }

// fleetObjects: a hub with org-viewers at 12 (written 4m ago) and admins at
// 6, and five members, one in each status.
func fleetObjects() []runtime.Object {
	recent := fleetNow.Add(-20 * time.Second)
	stale := testfixture.Reported(recent, 5, rbReport("org-viewers", "12", 5), rbReport("admins", "6", 5))
	stale.StaleSince = &metav1.Time{Time: fleetNow.Add(-3 * time.Minute)}
	stale.ServedRevision = "12"
	current := testfixture.Reported(recent, 4, rbReport("org-viewers", "12", 3), rbReport("admins", "6", 4))
	current.ServedRevision = "12"
	behind := testfixture.Reported(recent, 10, rbReport("org-viewers", "9", 10), rbReport("admins", "6", 10), rbReport("gone", "3", 1))
	behind.ServedRevision = "9"
	silent := testfixture.Reported(fleetNow.Add(-10*time.Minute), 2, rbReport("org-viewers", "9", 2))
	return []runtime.Object{
		writtenAt(binding("org-viewers", "ov-uid", "12", nil, "view", "org:viewers"), fleetNow.Add(-4*time.Minute)),
		writtenAt(binding("admins", "a-uid", "6", nil, "admin", "org:admins"), fleetNow.Add(-time.Hour)),
		testfixture.MemberCluster("member-1", map[string]string{"implicit.dev/cluster-stage": "canary"}, current),
		testfixture.MemberCluster("member-2", map[string]string{"implicit.dev/cluster-stage": "main"}, behind),
		testfixture.MemberCluster("member-3", nil, stale),
		testfixture.MemberCluster("member-4", nil, silent),
		testfixture.MemberCluster("member-5", nil, fleetv1alpha1.MemberClusterStatus{}),
	}
}

func TestFleetStatus(t *testing.T) {
	t.Parallel()
	dyn := newFake(t, fleetObjects()...)
	st, err := readFleetStatus(context.Background(), dyn, rbResolver, globalNS, fleetNow, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		status string
		behind int
		since  time.Time
	}
	want := map[string]row{
		"member-1": {memberCurrent, 0, time.Time{}},
		// org-viewers at another version (the hub wrote 12 4m ago), gone
		// no longer on the hub.
		"member-2": {memberBehind, 2, fleetNow.Add(-4 * time.Minute)},
		"member-3": {memberStale, 0, time.Time{}},
		"member-4": {memberSilent, 1, fleetNow.Add(-4 * time.Minute)},
		"member-5": {memberUnreported, 0, time.Time{}},
	}
	if len(st.Members) != len(want) {
		t.Fatalf("%d members, want %d: %+v", len(st.Members), len(want), st.Members)
	}
	for _, m := range st.Members {
		w := want[m.Name]
		var since time.Time
		if m.BehindSince != nil {
			since = m.BehindSince.Time
		}
		if m.Status != w.status || m.Behind != w.behind || !since.Equal(w.since) {
			t.Errorf("%s: status %s, behind %d since %v; want %s, %d since %v", m.Name, m.Status, m.Behind, since, w.status, w.behind, w.since)
		}
	}
	var out bytes.Buffer
	if err := printFleetStatus(&out, st, fleetNow); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"NAME LABELS REVISION LAG STALE-SINCE LAST-REPORT STATUS",
		"member-1 implicit.dev/cluster-stage=canary 12 0 <none> 20s Current",
		"member-2 implicit.dev/cluster-stage=main 9 2 (4m) <none> 20s Behind",
		"member-3 <none> 12 0 3m 20s Stale",
		"member-4 <none> <none> 1 (4m) <none> 10m Silent",
		"member-5 <none> <none> 0 <none> <none> Unreported",
	} {
		if !strings.Contains(squeezed(out.String()), line) {
			t.Errorf("table lacks %q:\n%s", line, out.String())
		}
	}
}

// squeezed is a table with each run of blanks one space.
func squeezed(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(lines, "\n")
}

func TestFleetStatusWithoutCRD(t *testing.T) {
	t.Parallel()
	dyn := newFake(t)
	dyn.PrependReactor("list", "memberclusters", notFoundReactor)
	_, err := readFleetStatus(context.Background(), dyn, rbResolver, globalNS, fleetNow, 2*time.Minute)
	if err == nil || !strings.Contains(err.Error(), "not a fleet's hub") {
		t.Errorf("err = %v, want one saying this is not a fleet's hub", err)
	}
}

func TestFleetSourceStatus(t *testing.T) {
	t.Parallel()
	objs := fleetObjects()
	cand := binding("org-viewers.next", "c-uid", "14", candidateAnnotations("org-viewers"), "view", "org:viewers", "org:auditors")
	objs = append(objs, cand)
	// member-1 has the candidate in cluster, member-2 not in cluster.
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		if u.GetKind() != fleetv1alpha1.Kind || (u.GetName() != "member-1" && u.GetName() != "member-2") {
			continue
		}
		in := u.GetName() == "member-1"
		c := map[string]any{"resource": "rolebindings.rbac.authorization.k8s.io", "name": "org-viewers.next", "for": "org-viewers",
			"resourceVersion": "14", "inCluster": in, "canaryNamespaces": int64(0), "stableNamespaces": int64(10), "auditDifferences": int64(0)}
		if in {
			c["canaryNamespaces"], c["stableNamespaces"], c["auditDifferences"] = int64(2), int64(1), int64(5)
		}
		if err := unstructured.SetNestedSlice(u.Object, []any{c}, "status", "candidates"); err != nil {
			t.Fatal(err)
		}
	}
	st, err := readFleetSourceStatus(context.Background(), rbRollout(newFake(t, objs...), "org-viewers"), fleetNow, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if st.ResourceVersion != "12" {
		t.Errorf("hub resourceVersion %q, want 12", st.ResourceVersion)
	}
	serves := map[string]string{}
	for _, m := range st.Members {
		serves[m.Member] = m.Serves + "/" + yesNo(m.Current)
	}
	if want := map[string]string{"member-1": "12/yes", "member-2": "9/no", "member-3": "12/yes", "member-4": "9/no", "member-5": "/no"}; !mapsEqual(serves, want) {
		t.Errorf("serves %v, want %v", serves, want)
	}
	if len(st.Candidates) != 2 || !st.Candidates[0].InCluster || st.Candidates[0].CanaryNamespaces != 2 || st.Candidates[1].InCluster || !st.Candidates[1].Current {
		t.Errorf("candidates %+v, want member-1's in cluster (2 canary) and member-2's not", st.Candidates)
	}
	var out bytes.Buffer
	if err := printFleetSourceStatus(&out, st, fleetNow); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"the hub's resourceVersion 12, written 4m ago", "member-1 org-viewers.next 14 yes yes 2 1 5"} {
		if !strings.Contains(squeezed(out.String()), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRolloutStatusMembers: on a hub, rollout status of a global source
// adds each member's share by its report; a member that reports no
// candidate of the source shows as such.
func TestRolloutStatusMembers(t *testing.T) {
	t.Parallel()
	stable := binding("org-viewers", "stable-uid", "7", nil, "view", "org:viewers")
	cand := binding("org-viewers.next", "cand-uid", "8", candidateAnnotations("org-viewers"), "view", "org:viewers", "org:auditors")
	st1 := testfixture.Reported(fleetNow, 3)
	st1.Candidates = []fleetv1alpha1.CandidateReport{{Resource: "rolebindings.rbac.authorization.k8s.io", Name: "org-viewers.next", For: "org-viewers",
		ResourceVersion: "8", InCluster: true, CanaryNamespaces: 1, StableNamespaces: 2, AuditDifferences: 4}}
	dyn := newFake(t, stable, cand, viewItem("team-a", globalNS, "", "org-viewers.next"),
		testfixture.MemberCluster("member-1", nil, st1), testfixture.MemberCluster("member-2", nil, testfixture.Reported(fleetNow, 5)))
	st, err := rbRollout(dyn, "org-viewers").status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []RolloutMember{{Member: "member-1", Candidate: "org-viewers.next", InCluster: true, CanaryNamespaces: 1, StableNamespaces: 2, AuditDifferences: 4}, {Member: "member-2"}}
	if len(st.Members) != 2 || st.Members[0] != want[0] || st.Members[1] != want[1] {
		t.Errorf("members %+v, want %+v", st.Members, want)
	}
	var out bytes.Buffer
	if err := printRolloutStatus(&out, st); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"MEMBER CLUSTERS", "member-1 org-viewers.next yes 1/2 4", "member-2 - - - -"} {
		if !strings.Contains(squeezed(out.String()), line) {
			t.Errorf("output lacks %q:\n%s", line, out.String())
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// notFoundReactor answers as a cluster without the resource's CRD.
func notFoundReactor(a clienttesting.Action) (bool, runtime.Object, error) {
	return true, nil, apierrors.NewNotFound(a.GetResource().GroupResource(), "")
}

// TestFleetStatusKindGone: a member reporting a kind the hub no longer
// serves is behind on it; the others are read as usual.
func TestFleetStatusKindGone(t *testing.T) {
	t.Parallel()
	st := testfixture.Reported(fleetNow, 2, rbReport("org-viewers", "12", 2),
		fleetv1alpha1.SourceReport{Resource: "guardrails.policy.example.com", Name: "g", ResourceVersion: "3", Namespaces: 2})
	dyn := newFake(t, writtenAt(binding("org-viewers", "ov-uid", "12", nil, "view", "org:viewers"), fleetNow), testfixture.MemberCluster("member-1", nil, st))
	resolve := func(gr schema.GroupResource) (schema.GroupVersionResource, error) {
		if gr.Group == "policy.example.com" {
			return schema.GroupVersionResource{}, &meta.NoResourceMatchError{PartialResource: gr.WithVersion("")}
		}
		return rbSource, nil
	}
	got, err := readFleetStatus(context.Background(), dyn, resolve, globalNS, fleetNow, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if m := got.Members[0]; m.Behind != 1 || m.Status != memberBehind || m.BehindSources[0] != "guardrails.policy.example.com/g" {
		t.Errorf("member-1 %+v, want Behind on guardrails.policy.example.com/g only", m)
	}
}
