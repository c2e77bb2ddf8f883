package admission_test

import (
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/implicit-dev/implicit-apiserver/internal/testfixture"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission"
	"github.com/implicit-dev/implicit-apiserver/pkg/admission/webhookconfig"
	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/fleethub"
)

// TestFanoutFleet: on a hub (--fleet-hub), the fan-out warning of a global
// source's change adds the members' counts, by their last reports, to the
// hub's own; a change below the global namespace counts the hub only.
func TestFanoutFleet(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	rb := rolebindings.String()
	viewers := func(n int32) fleetv1alpha1.SourceReport {
		return fleetv1alpha1.SourceReport{Resource: rb, Name: "admins", ResourceVersion: "5", Namespaces: n}
	}
	fleet := func(members ...fleetv1alpha1.MemberClusterStatus) admission.FleetIndex {
		tr := fleethub.NewTracker(fleethub.Config{Clock: clocktesting.NewFakePassiveClock(now)})
		for i, st := range members {
			tr.OnAdd(testfixture.MemberCluster("member-"+string(rune('1'+i)), nil, st), true)
		}
		return tr
	}
	update := request(admissionv1.Update, rolebindings, global, "admins", roleBinding(global, "admins"), roleBinding(global, "admins", annotated("new", "yes")))
	tests := []guardCase{
		{
			name:         "the members' counts are added to the hub's",
			index:        &fakeIndex{reach: 7},
			fleet:        fleet(testfixture.Reported(now, 10, viewers(9)), testfixture.Reported(now, 3, viewers(3))),
			req:          update,
			wantAllowed:  true,
			wantWarnings: []string{"implicit.dev: this change reaches 19 namespaces in 3 clusters"},
		},
		{
			name:         "a creation counts each member's namespaces",
			index:        &fakeIndex{reach: 7},
			fleet:        fleet(testfixture.Reported(now, 10), testfixture.Reported(now, 3)),
			req:          request(admissionv1.Create, rolebindings, global, "admins", nil, roleBinding(global, "admins")),
			wantAllowed:  true,
			wantWarnings: []string{"implicit.dev: this change reaches 20 namespaces in 3 clusters"},
		},
		{
			name:         "old and missing reports are said",
			index:        &fakeIndex{reach: 1},
			fleet:        fleet(testfixture.Reported(now.Add(-time.Hour), 10, viewers(9)), fleetv1alpha1.MemberClusterStatus{}),
			req:          request(admissionv1.Delete, rolebindings, global, "admins", roleBinding(global, "admins"), nil),
			wantAllowed:  true,
			wantWarnings: []string{"implicit.dev: this change reaches 10 namespaces in 2 clusters (1 members' counts older than 2m) (1 members not reported yet)"},
		},
		{
			name:         "a hub without members counts itself",
			index:        &fakeIndex{reach: 7},
			fleet:        fleet(),
			req:          update,
			wantAllowed:  true,
			wantWarnings: []string{"implicit.dev: this change reaches 7 namespaces in 1 cluster"},
		},
		{
			name:         "a materialized kind's change says the hub's copies",
			index:        &fakeIndex{reach: 2},
			fleet:        fleet(testfixture.Reported(now, 10, viewers(9))),
			req:          update,
			materialize:  []string{"rolebindings"},
			wantAllowed:  true,
			wantWarnings: []string{"implicit.dev: this change reaches 11 namespaces in 2 clusters and makes 2 real writes here (materialized copies, delivery: Materialize)"},
		},
		{
			name:         "a parent's change on the hub counts the hub only",
			index:        &fakeIndex{reach: 3, descendants: map[string]bool{"org": true}},
			fleet:        fleet(testfixture.Reported(now, 10, viewers(9))),
			req:          request(admissionv1.Update, rolebindings, "org", "admins", roleBinding("org", "admins"), roleBinding("org", "admins", annotated("new", "yes"))),
			wantAllowed:  true,
			wantWarnings: []string{"implicit.dev: this change reaches 3 namespaces"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runGuard(t, webhookconfig.PathFanout, tc)
		})
	}
}
