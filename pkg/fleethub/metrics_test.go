package fleethub_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	fx "github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/fleethub"
)

// TestMetrics: the gauges say each member's last report, staleness,
// sources behind the hub, and whether it never reported (member-3: no
// last-report series, unreported 1); a deleted member's series go.
func TestMetrics(t *testing.T) {
	reg := testutil.NewFakeKubeRegistry("1.37.0")
	fleethub.RegisterMetrics(reg.MustRegister)
	tr := fleethub.NewTracker(fleethub.Config{Clock: clocktesting.NewFakePassiveClock(now)})
	stale := fx.Reported(now, 3, src("viewers", "9", 3))
	stale.StaleSince = &metav1.Time{Time: now.Add(-time.Minute)}
	m2 := fx.MemberCluster("member-2", nil, stale)
	tr.OnAdd(fx.MemberCluster("member-1", nil, fx.Reported(now, 3, src("viewers", "5", 3), src("gone", "4", 3))), true)
	tr.OnAdd(m2, true)
	tr.OnAdd(fx.MemberCluster("member-3", nil, fleetv1alpha1.MemberClusterStatus{}), true)
	tr.SetMetrics(hubRVs{rb + "/viewers": "9"})
	names := []string{"implicit_fleet_member_last_report_timestamp_seconds", "implicit_fleet_member_stale", "implicit_fleet_member_sources_behind", "implicit_fleet_member_unreported"}
	want := `
# HELP implicit_fleet_member_last_report_timestamp_seconds [ALPHA] Unix time of a member cluster's last report (its MemberCluster's status.reportTime) on this hub; absent before its first.
# TYPE implicit_fleet_member_last_report_timestamp_seconds gauge
implicit_fleet_member_last_report_timestamp_seconds{cluster="member-1"} 1.7959212e+09
implicit_fleet_member_last_report_timestamp_seconds{cluster="member-2"} 1.7959212e+09
# HELP implicit_fleet_member_sources_behind [ALPHA] Hub sources a member cluster serves at a resourceVersion other than the hub's current one, or that the hub no longer has, by its last report.
# TYPE implicit_fleet_member_sources_behind gauge
implicit_fleet_member_sources_behind{cluster="member-1"} 2
implicit_fleet_member_sources_behind{cluster="member-2"} 0
implicit_fleet_member_sources_behind{cluster="member-3"} 0
# HELP implicit_fleet_member_stale [ALPHA] 1 while a member cluster reports that it can't read this hub (status.staleSince: it serves its last known sources), else 0.
# TYPE implicit_fleet_member_stale gauge
implicit_fleet_member_stale{cluster="member-1"} 0
implicit_fleet_member_stale{cluster="member-2"} 1
implicit_fleet_member_stale{cluster="member-3"} 0
# HELP implicit_fleet_member_unreported [ALPHA] 1 while a registered member cluster has never reported to this hub (its MemberCluster has no status.reportTime), else 0: such a member has no last-report series.
# TYPE implicit_fleet_member_unreported gauge
implicit_fleet_member_unreported{cluster="member-1"} 0
implicit_fleet_member_unreported{cluster="member-2"} 0
implicit_fleet_member_unreported{cluster="member-3"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	tr.OnDelete(m2)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(strings.Join(slicesWithout(strings.Split(want, "\n"), "member-2"), "\n")), names...); err != nil {
		t.Errorf("after member-2's deletion: %v", err)
	}
}

func slicesWithout(lines []string, s string) []string {
	var out []string
	for _, l := range lines {
		if !strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}
