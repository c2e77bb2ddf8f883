package authz_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

// BenchmarkShadowDecisions decides the requests of BenchmarkAuthorize (1,000
// tenants, 100 global RoleBindings) without a candidate and with an open
// audit-only one: a candidate of global-099, the binding the allowed
// requests go through, that drops group-099, selecting no namespace. With
// it, every request is decided a second time, and every allowed one is a
// would-deny difference recorded (counter, key, sample); Events are not
// recorded (no recorder). Cold requests miss the decision cache, warm ones
// hit it. Besides ns/op it reports p50-ns and p99-ns of 20,000 decisions
// timed one by one after the timed loop.
//
//	go test -run '^$' -bench ShadowDecisions -benchtime 2s ./pkg/authz/
func BenchmarkShadowDecisions(b *testing.B) {
	roles := []*rbacv1.ClusterRole{
		clusterRole("view", rule("get,list,watch", "", "pods,configmaps,services"), rule("get,list,watch", "apps", "deployments,replicasets")),
		clusterRole("edit", rule("get,list,watch,create,update,patch,delete", "", "pods,configmaps,services")),
	}
	last := benchGlobals - 1
	candidate := roleBinding(global, fmt.Sprintf("global-%03d.next", last), clusterRoleRef("edit"),
		[]rbacv1.Subject{group(fmt.Sprintf("team-%03d", last)), user(fmt.Sprintf("user-%03d-a", last))},
		candidateFor(fmt.Sprintf("global-%03d", last), nobody))
	lastOnly := []string{"system:authenticated", fmt.Sprintf("group-%03d", last)}
	noOne := []string{"system:authenticated", "system:serviceaccounts"}
	names := make([]string, benchNames)
	for i := range names {
		names[i] = "pod-" + strconv.Itoa(i)
	}
	for _, world := range []struct {
		name string
		objs []runtime.Object
	}{
		{"no-candidate", benchWorld()},
		{"open-candidate", append(benchWorld(), candidate)},
	} {
		f := newFixture(b, fixtureOptions{clusterRoles: roles}, world.objs...)
		cursor := 0
		for _, bc := range []struct {
			name    string
			cold    bool
			groups  []string
			allowed bool
		}{
			{name: "cold/allowed", cold: true, groups: lastOnly, allowed: true},
			{name: "cold/no-opinion", cold: true, groups: noOne},
			{name: "warm/allowed", groups: lastOnly, allowed: true},
			{name: "warm/no-opinion", groups: noOne},
		} {
			decide := func(i int) error {
				a := authz.Attributes{User: "someone", Groups: bc.groups, Namespace: benchTenant(i % benchTenants), Verb: "get", Resource: "pods", Name: "web"}
				if bc.cold {
					a.Name = names[i%benchNames]
				}
				d, err := f.authz.Authorize(a)
				if err != nil || d.Allowed != bc.allowed {
					return fmt.Errorf("Authorize(%+v) = %+v, %v; want allowed %v", a, d, err, bc.allowed)
				}
				return nil
			}
			b.Run(world.name+"/"+bc.name, func(b *testing.B) {
				if !bc.cold {
					for i := range benchTenants {
						if err := decide(i); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportAllocs()
				i := cursor
				for b.Loop() {
					if err := decide(i); err != nil {
						b.Fatal(err)
					}
					i++
				}
				samples := make([]time.Duration, benchSamples)
				for j := range samples {
					start := time.Now()
					err := decide(i)
					samples[j] = time.Since(start)
					if err != nil {
						b.Fatal(err)
					}
					i++
				}
				cursor = i
				slices.Sort(samples)
				b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds()), "p50-ns")
				b.ReportMetric(float64(samples[len(samples)*99/100].Nanoseconds()), "p99-ns")
			})
		}
	}
}
