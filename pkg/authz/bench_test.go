package authz_test

import (
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

const (
	benchOrgs          = 10
	benchTenantsPerOrg = 100
	benchTenants       = benchOrgs * benchTenantsPerOrg
	benchGlobals       = 100
	// benchSamples decisions are timed one by one for the percentiles.
	benchSamples = 20_000
	// benchNames distinct object names: with the tenant, a cold key
	// repeats only after lcm(1,000, 65,536) decisions, far beyond the
	// cache's 10,000.
	benchNames = 1 << 16
)

// benchTenant is the name of tenant t, a child of its org.
func benchTenant(t int) string {
	return fmt.Sprintf("org-%02d-%03d", t/benchTenantsPerOrg, t%benchTenantsPerOrg)
}

// benchWorld is the global namespace, benchOrgs orgs of benchTenantsPerOrg
// tenants each (parent label), and benchGlobals global RoleBindings of three
// subjects each, users and groups mixed, to the ClusterRoles view and edit.
func benchWorld() []runtime.Object {
	objs := []runtime.Object{namespace(global)}
	for o := range benchOrgs {
		org := fmt.Sprintf("org-%02d", o)
		objs = append(objs, namespace(org))
		for c := range benchTenantsPerOrg {
			objs = append(objs, namespace(benchTenant(o*benchTenantsPerOrg+c), parent(org)))
		}
	}
	for g := range benchGlobals {
		subjects := []rbacv1.Subject{user(fmt.Sprintf("user-%03d-a", g)), user(fmt.Sprintf("user-%03d-b", g)), group(fmt.Sprintf("group-%03d", g))}
		ref := clusterRoleRef("view")
		if g%2 == 1 {
			subjects = []rbacv1.Subject{group(fmt.Sprintf("group-%03d", g)), group(fmt.Sprintf("team-%03d", g)), user(fmt.Sprintf("user-%03d-a", g))}
			ref = clusterRoleRef("edit")
		}
		objs = append(objs, roleBinding(global, fmt.Sprintf("global-%03d", g), ref, subjects))
	}
	return objs
}

// BenchmarkAuthorize decides requests in 1,000 tenants under 100 global
// RoleBindings: requests only the last binding (by name, the order the view
// is read in) allows, and requests no binding allows (no opinion). Cold
// requests name a new object each time, so every one misses the decision
// cache; warm ones cycle through one request per tenant, cached beforehand.
// Besides ns/op it reports decisions/s, and p50-ns and p99-ns of 20,000
// decisions timed one by one after the timed loop (each includes the cost of
// reading the clock twice).
//
//	go test -run '^$' -bench Authorize -benchtime 2s ./pkg/authz/
func BenchmarkAuthorize(b *testing.B) {
	f := newFixture(b, fixtureOptions{clusterRoles: []*rbacv1.ClusterRole{
		clusterRole("view", rule("get,list,watch", "", "pods,configmaps,services"), rule("get,list,watch", "apps", "deployments,replicasets")),
		clusterRole("edit", rule("get,list,watch,create,update,patch,delete", "", "pods,configmaps,services")),
	}}, benchWorld()...)
	tenants := make([]string, benchTenants)
	for t := range tenants {
		tenants[t] = benchTenant(t)
	}
	names := make([]string, benchNames)
	for i := range names {
		names[i] = "pod-" + strconv.Itoa(i)
	}
	// The last binding, global-099, binds group-099 to edit.
	lastOnly := []string{"system:authenticated", fmt.Sprintf("group-%03d", benchGlobals-1)}
	nobody := []string{"system:authenticated", "system:serviceaccounts"}
	ask := func(groups []string, cold bool) func(i int) authz.Attributes {
		return func(i int) authz.Attributes {
			a := authz.Attributes{User: "someone", Groups: groups, Namespace: tenants[i%benchTenants], Verb: "get", Resource: "pods", Name: "web"}
			if cold {
				a.Name = names[i%benchNames]
			}
			return a
		}
	}

	for _, bc := range []struct {
		name    string
		cold    bool
		groups  []string
		allowed bool
	}{
		{name: "cold/allowed", cold: true, groups: lastOnly, allowed: true},
		{name: "cold/no-opinion", cold: true, groups: nobody},
		{name: "warm/allowed", groups: lastOnly, allowed: true},
		{name: "warm/no-opinion", groups: nobody},
	} {
		next := ask(bc.groups, bc.cold)
		decide := func(i int) error {
			d, err := f.authz.Authorize(next(i))
			if err != nil || d.Allowed != bc.allowed {
				return fmt.Errorf("Authorize(%+v) = %+v, %v; want allowed %v", next(i), d, err, bc.allowed)
			}
			return nil
		}
		prewarm := func(b *testing.B) {
			for i := range benchTenants {
				if err := decide(i); err != nil {
					b.Fatal(err)
				}
			}
		}
		// cursor is the next request's index: cold runs never ask what an
		// earlier run (or round) left in the cache.
		var cursor atomic.Int64
		b.Run(bc.name, func(b *testing.B) {
			if !bc.cold {
				prewarm(b)
			}
			b.ReportAllocs()
			i := int(cursor.Load())
			first := i
			for b.Loop() {
				if err := decide(i); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(i-first)/b.Elapsed().Seconds(), "decisions/s")

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
			cursor.Store(int64(i))
			slices.Sort(samples)
			b.ReportMetric(float64(samples[len(samples)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(samples[len(samples)*99/100].Nanoseconds()), "p99-ns")
		})
		// Concurrent throughput, as kube-apiserver calls the webhook.
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			if !bc.cold {
				prewarm(b)
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := decide(int(cursor.Add(1))); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}
