package fleethub_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"

	fx "github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/fleethub"
)

const rb = "rolebindings.rbac.authorization.k8s.io"

var now = time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)

func src(name, rv string, namespaces int32) fleetv1alpha1.SourceReport {
	return fleetv1alpha1.SourceReport{Resource: rb, Name: name, ResourceVersion: rv, Namespaces: namespaces}
}

func TestReach(t *testing.T) {
	t.Parallel()
	fresh, old := now.Add(-10*time.Second), now.Add(-5*time.Minute)
	tests := []struct {
		name     string
		members  []*unstructured.Unstructured
		resource string
		source   string
		deletion bool
		want     fleethub.Reach
	}{
		{
			name:     "no members",
			resource: rb, source: "viewers",
			want: fleethub.Reach{},
		},
		{
			name: "each member's count of the source is summed",
			members: []*unstructured.Unstructured{
				fx.MemberCluster("member-1", nil, fx.Reported(fresh, 10, src("viewers", "5", 7), src("admins", "6", 10))),
				fx.MemberCluster("member-2", nil, fx.Reported(fresh, 4, src("viewers", "5", 3))),
			},
			resource: rb, source: "viewers",
			want: fleethub.Reach{Namespaces: 10, Members: 2},
		},
		{
			name: "a member that doesn't report the source counts its namespaces total (a creation)",
			members: []*unstructured.Unstructured{
				fx.MemberCluster("member-1", nil, fx.Reported(fresh, 10, src("viewers", "5", 7))),
				fx.MemberCluster("member-2", nil, fx.Reported(fresh, 4)),
			},
			resource: rb, source: "viewers",
			want: fleethub.Reach{Namespaces: 11, Members: 2},
		},
		{
			name: "a deletion counts only the members that report the source",
			members: []*unstructured.Unstructured{
				fx.MemberCluster("member-1", nil, fx.Reported(fresh, 10, src("viewers", "5", 7))),
				fx.MemberCluster("member-2", nil, fx.Reported(fresh, 4)),
			},
			resource: rb, source: "viewers", deletion: true,
			want: fleethub.Reach{Namespaces: 7, Members: 2},
		},
		{
			name: "another kind's source of the same name is another source",
			members: []*unstructured.Unstructured{
				fx.MemberCluster("member-1", nil, fx.Reported(fresh, 10, src("viewers", "5", 7))),
			},
			resource: "roles.rbac.authorization.k8s.io", source: "viewers",
			want: fleethub.Reach{Namespaces: 10, Members: 1},
		},
		{
			name: "old reports are counted and said to be old",
			members: []*unstructured.Unstructured{
				fx.MemberCluster("member-1", nil, fx.Reported(old, 10, src("viewers", "5", 7))),
				fx.MemberCluster("member-2", nil, fx.Reported(fresh, 4, src("viewers", "5", 4))),
				fx.MemberCluster("member-3", nil, fx.Reported(now.Add(-3*time.Minute), 2, src("viewers", "5", 1))),
			},
			resource: rb, source: "viewers",
			want: fleethub.Reach{Namespaces: 12, Members: 3, Old: 2},
		},
		{
			name: "a registered member that never reported is not summed but said",
			members: []*unstructured.Unstructured{
				fx.MemberCluster("member-1", nil, fx.Reported(fresh, 10, src("viewers", "5", 7))),
				fx.MemberCluster("member-2", nil, fleetv1alpha1.MemberClusterStatus{}),
			},
			resource: rb, source: "viewers",
			want: fleethub.Reach{Namespaces: 7, Members: 1, Unreported: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := fleethub.NewTracker(fleethub.Config{Clock: clocktesting.NewFakePassiveClock(now)})
			for _, m := range tc.members {
				tr.OnAdd(m, true)
			}
			tc.want.OldAfter = fleethub.DefaultOldAfter
			if got := tr.Reach(tc.resource, tc.source, tc.deletion); got != tc.want {
				t.Errorf("Reach = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestReachFollowsReports: the sums are recomputed on every event of the
// informer: a new report replaces the member's last, a deleted member
// leaves the sums.
func TestReachFollowsReports(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakePassiveClock(now)
	tr := fleethub.NewTracker(fleethub.Config{Clock: clk, OldAfter: time.Minute})
	m1 := fx.MemberCluster("member-1", nil, fx.Reported(now, 10, src("viewers", "5", 7)))
	m2 := fx.MemberCluster("member-2", nil, fx.Reported(now, 4, src("viewers", "5", 4)))
	tr.OnAdd(m1, true)
	tr.OnAdd(m2, true)
	if got := tr.Reach(rb, "viewers", false); got.Namespaces != 11 || got.Members != 2 {
		t.Fatalf("Reach = %+v, want 11 namespaces in 2 members", got)
	}
	m1b := fx.MemberCluster("member-1", nil, fx.Reported(now, 12, src("viewers", "6", 2)))
	tr.OnUpdate(m1, m1b)
	if got := tr.Reach(rb, "viewers", false); got.Namespaces != 6 {
		t.Errorf("after member-1's new report: Reach = %+v, want 6 namespaces", got)
	}
	clk.SetTime(now.Add(90 * time.Second))
	if got := tr.Reach(rb, "viewers", false); got.Old != 2 || got.OldAfter != time.Minute {
		t.Errorf("90s later: Reach = %+v, want both counts old (older than 1m)", got)
	}
	tr.OnDelete(m2)
	if got := tr.Reach(rb, "viewers", false); got.Namespaces != 2 || got.Members != 1 {
		t.Errorf("after member-2's deletion: Reach = %+v, want 2 namespaces in 1 member", got)
	}
}

type hubRVs map[string]string

func (h hubRVs) SourceResourceVersion(resource, name string) (string, bool) {
	rv, ok := h[resource+"/"+name]
	return rv, ok
}

func TestBehind(t *testing.T) {
	t.Parallel()
	hub := hubRVs{rb + "/viewers": "9", rb + "/admins": "6"}
	st := fx.Reported(now, 3, src("viewers", "5", 3), src("admins", "6", 3), src("gone", "4", 3))
	st.StaleSince = &metav1.Time{Time: now}
	got := fleethub.Behind(st, hub)
	if len(got) != 2 || got[0].Name != "viewers" || got[1].Name != "gone" {
		t.Errorf("Behind = %+v, want viewers (another version) and gone (no longer on the hub)", got)
	}
}
