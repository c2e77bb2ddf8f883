package authz_test

import (
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/authz"
)

// heapInuse returns the heap in use after a full collection.
func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// uniqueName returns a name of n bytes, unique per i: what a requester sends
// in a SelfSubjectAccessReview's resourceAttributes.name to defeat the cache.
func uniqueName(i, n int) string {
	p := strconv.Itoa(i) + "-"
	return p + strings.Repeat("x", n-len(p))
}

// TestAuthorizeMemoryBound floods the authorizer with requests of unique,
// long names in a tenant namespace, none of which any binding allows, as
// kube-apiserver forwards a user's SelfSubjectAccessReviews. The heap
// retained afterwards stays under DefaultCacheBytes plus slack: the decision
// cache is bounded in bytes and does not keep requests whose key is longer
// than MaxCachedKeyBytes at all. (Before, 300 names of 1 MiB retained about
// 300 MiB, and 10,000 of 15 KiB about 150 MiB.) It measures the whole
// process's heap, so it runs alone: not in parallel.
func TestAuthorizeMemoryBound(t *testing.T) {
	const slack = 16 << 20
	tests := []struct {
		name    string
		count   int
		nameLen int
	}{
		{name: "300 names of 1 MiB", count: 300, nameLen: 1 << 20},
		{name: "10,000 names just under the cached key length", count: 10_000, nameLen: authz.MaxCachedKeyBytes - 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOptions{clusterRoles: testClusterRoles()}, world()...)
			before := heapInuse()
			for i := range tt.count {
				attrs := podReader("mallory", []string{"system:authenticated"}, "team-a")
				attrs.Name = uniqueName(i, tt.nameLen)
				if d := f.authorize(t, attrs); d.Allowed {
					t.Fatalf("request %d allowed: %+v", i, d)
				}
			}
			after := heapInuse()
			grew := int64(after) - int64(before)
			t.Logf("%d requests with names of %d bytes: heap in use grew by %.1f MiB", tt.count, tt.nameLen, float64(grew)/(1<<20))
			if limit := int64(authz.DefaultCacheBytes + slack); grew > limit {
				t.Errorf("heap in use grew by %d bytes, want at most %d (the cache's byte bound plus %d of slack)", grew, limit, slack)
			}
			// The fixture (and its cache) must live until after the measure.
			runtime.KeepAlive(f)
		})
	}
}

// BenchmarkCacheMemory is the figure of docs/benchmarks.md: the heap in use,
// after a full collection, once 100,000 unique SubjectAccessReviews of the
// largest cached size (names just under MaxCachedKeyBytes) have been
// decided, once 100,000 of the largest the handler takes (names of about
// 1 MiB, under its 1 MiB body limit), and once 300 of those went through the
// webhook handler itself (JSON included). Each request is denied (no opinion), as
// for a requester flooding the cache. It decides a fixed number whatever
// b.N; run it once:
//
//	go test -run '^$' -bench CacheMemory -benchtime 1x ./pkg/authz/
func BenchmarkCacheMemory(b *testing.B) {
	for _, bc := range []struct {
		name             string
		count, nameBytes int
		handler          bool
	}{
		{name: "sars=100000/name=16KiB", count: 100_000, nameBytes: authz.MaxCachedKeyBytes - 200},
		{name: "sars=100000/name=1MiB", count: 100_000, nameBytes: 1<<20 - 4<<10},
		{name: "sars=300/name=1MiB/handler", count: 300, nameBytes: 1<<20 - 4<<10, handler: true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFixture(b, fixtureOptions{clusterRoles: testClusterRoles()}, world()...)
			h := f.authz.Handler()
			before := heapInuse()
			b.ResetTimer()
			for range b.N {
				for i := range bc.count {
					name := uniqueName(i, bc.nameBytes)
					if bc.handler {
						body, err := json.Marshal(review("mallory", []string{"system:authenticated"}, &authorizationv1.ResourceAttributes{
							Namespace: "team-a", Verb: "get", Version: "v1", Resource: "pods", Name: name}))
						if err != nil {
							b.Fatal(err)
						}
						if rec := serve(h, "POST", body); rec.Code != 200 {
							b.Fatalf("status %d: %s", rec.Code, rec.Body.String())
						}
						continue
					}
					attrs := podReader("mallory", []string{"system:authenticated"}, "team-a")
					attrs.Name = name
					f.authorize(b, attrs)
				}
			}
			b.StopTimer()
			after := heapInuse()
			b.ReportMetric(float64(after)/(1<<20), "heap-inuse-MiB")
			b.ReportMetric((float64(after)-float64(before))/(1<<20), "heap-growth-MiB")
			runtime.KeepAlive(f)
		})
	}
}
