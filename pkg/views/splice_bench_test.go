package views_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
)

// BenchmarkBatchMemberEncode measures what one tenant's event of a global
// edit costs pkg/views in a fan-out: its batch item, then its watch frame
// spliced from the template's JSON encoding (the encoding made once, before
// the timer).
//
//	go test -run '^$' -bench BatchMemberEncode -benchmem ./pkg/views/
func BenchmarkBatchMemberEncode(b *testing.B) {
	enc := encoders(b)["json watch frame"]
	objs := views.NewObjects(newObject(), 0)
	src := spliceSources("global-0", "blue", "org:viewers", 80)[rolebindings.Resource]
	r := merge.Result{Item: merge.Item{Namespace: global, Name: "global-0", Locked: true, Object: src}, Scope: merge.ScopeGlobal}
	namespaces := make([]string, 2000)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("tenant-%04d", i)
	}
	const version = "f0123456789abcdef.v1234-5678-0-0-9012.p1-5677-0-tenant-0000.s1a2b3c4d"
	id := runtime.Identifier("json watch frame")
	encode := func(i int) {
		obj, err := objs.BatchItem(rolebindings.Resource, namespaces[i%len(namespaces)], r, version)
		if err != nil {
			b.Fatal(err)
		}
		if err := obj.(runtime.CacheableObject).CacheEncode(id, enc, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	encode(0) // the template's encoding
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		encode(i)
		i++
	}
}

// TestUIDIsNameBasedUUID pins UID to the version 5 UUID of
// "<source>/<namespace>" in the views' namespace, as uuid.NewSHA1 makes it:
// the uids clients hold stay the same across versions of the server.
func TestUIDIsNameBasedUUID(t *testing.T) {
	space := uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://implicit.dev/views"))
	long := strings.Repeat("n", 200) // past UID's stack buffer
	for _, source := range []types.UID{"", "0b5c8e2e-8a33-4c1e-9f6e-2f1f7d7b1a11", "uid-x", types.UID(long)} {
		for _, ns := range []string{"", "team-a", "org-001-07", long} {
			want := types.UID(uuid.NewSHA1(space, []byte(string(source)+"/"+ns)).String())
			if got := views.UID(source, ns); got != want {
				t.Errorf("UID(%q, %q) = %s, want %s", source, ns, got, want)
			}
		}
	}
}
