package authz

import (
	"strconv"
	"strings"
	"testing"
)

func TestDecisionCache(t *testing.T) {
	t.Parallel()
	// key returns a key of n bytes, unique per i.
	key := func(i, n int) string {
		p := strconv.Itoa(i) + ":"
		return p + strings.Repeat("k", n-len(p))
	}
	allowed := cached{d: Decision{Allowed: true, Reason: "because"}}
	tests := []struct {
		name     string
		entries  int
		maxBytes int64
		keyLen   int
		adds     int
		// wantKept are the indexes still cached, the most recent last.
		wantKept []int
	}{
		{name: "under both bounds", entries: 4, maxBytes: 1 << 20, keyLen: 100, adds: 3, wantKept: []int{0, 1, 2}},
		{name: "entry bound", entries: 2, maxBytes: 1 << 20, keyLen: 100, adds: 5, wantKept: []int{3, 4}},
		{
			name: "byte bound", entries: 100, keyLen: 1000, adds: 10, wantKept: []int{7, 8, 9},
			maxBytes: 3 * entryBytes(key(0, 1000), allowed),
		},
		{
			name: "byte bound, one byte short of three", entries: 100, keyLen: 1000, adds: 10, wantKept: []int{8, 9},
			maxBytes: 3*entryBytes(key(0, 1000), allowed) - 1,
		},
		{name: "entry larger than the byte bound", entries: 100, maxBytes: 1000, keyLen: 1000, adds: 3},
		{name: "key longer than MaxCachedKeyBytes", entries: 100, maxBytes: 1 << 30, keyLen: MaxCachedKeyBytes + 1, adds: 3},
		{name: "key of MaxCachedKeyBytes", entries: 100, maxBytes: 1 << 30, keyLen: MaxCachedKeyBytes, adds: 2, wantKept: []int{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := newDecisionCache(tt.entries, tt.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tt.adds {
				c.add(key(i, tt.keyLen), allowed)
			}
			kept := map[int]bool{}
			for _, i := range tt.wantKept {
				kept[i] = true
			}
			for i := range tt.adds {
				_, ok := c.get(key(i, tt.keyLen))
				if ok != kept[i] {
					t.Errorf("entry %d cached: %v, want %v", i, ok, kept[i])
				}
			}
			entries, bytes := c.usage()
			if entries != len(tt.wantKept) {
				t.Errorf("%d entries, want %d", entries, len(tt.wantKept))
			}
			if want := int64(len(tt.wantKept)) * entryBytes(key(0, tt.keyLen), allowed); bytes != want {
				t.Errorf("%d bytes accounted, want %d", bytes, want)
			}
			if bytes > tt.maxBytes {
				t.Errorf("%d bytes held, over the bound of %d", bytes, tt.maxBytes)
			}
		})
	}
}

// TestDecisionCacheReplace: a key added again replaces its decision and its
// bytes, and the least recently used entry is the one evicted.
func TestDecisionCacheReplace(t *testing.T) {
	t.Parallel()
	short, long := cached{}, cached{d: Decision{Allowed: true, Reason: strings.Repeat("r", 500)}}
	c, err := newDecisionCache(10, 3*entryBytes("a", long))
	if err != nil {
		t.Fatal(err)
	}
	c.add("a", short)
	c.add("a", long)
	if _, bytes := c.usage(); bytes != entryBytes("a", long) {
		t.Fatalf("%d bytes after replacing, want %d", bytes, entryBytes("a", long))
	}
	c.add("b", long)
	c.add("c", long)
	c.get("a") // b is now the least recently used
	c.add("d", long)
	for k, want := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if _, ok := c.get(k); ok != want {
			t.Errorf("%s cached: %v, want %v", k, ok, want)
		}
	}
	if entries, bytes := c.usage(); entries != 3 || bytes != 3*entryBytes("a", long) {
		t.Errorf("usage %d entries, %d bytes; want 3, %d", entries, bytes, 3*entryBytes("a", long))
	}
}
