package merge_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

const resource = "rolebindings"

// item is an unlocked source item whose Object identifies it.
func item(namespace, name string) merge.Item {
	return merge.Item{Namespace: namespace, Name: name, Object: namespace + "/" + name}
}

// locked is a locked source item whose Object identifies it.
func locked(namespace, name string) merge.Item {
	it := item(namespace, name)
	it.Locked = true
	return it
}

func level(scope merge.Scope, namespace string, exclusions []merge.Exclusion, items ...merge.Item) merge.Level {
	return merge.Level{Scope: scope, Namespace: namespace, Exclusions: exclusions, Items: items}
}

func excl(entries ...string) []merge.Exclusion {
	var out []merge.Exclusion
	for _, e := range entries {
		res, name, _ := strings.Cut(e, "/")
		out = append(out, merge.Exclusion{Resource: res, Name: name})
	}
	return out
}

// itemsOf serves source items by namespace.
func itemsOf(items ...merge.Item) func(string) []merge.Item {
	m := map[string][]merge.Item{}
	for _, it := range items {
		m[it.Namespace] = append(m[it.Namespace], it)
	}
	return func(namespace string) []merge.Item { return m[namespace] }
}

func TestIsLocked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		annotations map[string]string
		want        bool
	}{
		{name: "nil annotations", want: false},
		{name: "no lock annotation", annotations: map[string]string{"other": "true"}, want: false},
		{name: "locked", annotations: map[string]string{v1alpha1.AnnotationLocked: "true"}, want: true},
		{name: "explicitly unlocked", annotations: map[string]string{v1alpha1.AnnotationLocked: "false"}, want: false},
		{name: "empty value", annotations: map[string]string{v1alpha1.AnnotationLocked: ""}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := merge.IsLocked(tt.annotations); got != tt.want {
				t.Errorf("IsLocked(%v) = %v, want %v", tt.annotations, got, tt.want)
			}
		})
	}
}

func TestLevels(t *testing.T) {
	t.Parallel()
	team := excluding(ns("team", "dept"), "rolebindings/from-dept, bad")
	dept := excluding(ns("dept", "org"), "roles/*")
	org := excluding(ns("org", ""), "networkpolicies/deny")
	solo := excluding(ns("solo", ""), "rolebindings/x")
	system := excluding(ns("kube-system", ""), "rolebindings/x")
	items := itemsOf(
		item(globalNS, "g1"), item(globalNS, "g2"),
		item("org", "o1"), item("dept", "d1"), item("team", "t1"), item("team", "t2"),
		item("solo", "s1"), item("kube-system", "k1"),
	)

	tests := []struct {
		name    string
		lineage merge.Lineage
		want    []merge.Level
	}{
		{
			name:    "nonexistent namespace has no levels",
			lineage: merge.Lineage{},
		},
		{
			name:    "non-tenant has only its local level, without exclusions",
			lineage: merge.Lineage{Namespace: &system, Tenant: false},
			want:    []merge.Level{level(merge.ScopeLocal, "kube-system", nil, item("kube-system", "k1"))},
		},
		{
			name:    "tenant without parent: global then local",
			lineage: merge.Lineage{Namespace: &solo, Tenant: true},
			want: []merge.Level{
				level(merge.ScopeGlobal, globalNS, nil, item(globalNS, "g1"), item(globalNS, "g2")),
				level(merge.ScopeLocal, "solo", excl("rolebindings/x"), item("solo", "s1")),
			},
		},
		{
			name:    "tenant with ancestors: global, farthest ... nearest, local",
			lineage: merge.Lineage{Namespace: &team, Tenant: true, Ancestors: []*merge.Namespace{&dept, &org}},
			want: []merge.Level{
				level(merge.ScopeGlobal, globalNS, nil, item(globalNS, "g1"), item(globalNS, "g2")),
				level(merge.ScopeParent, "org", excl("networkpolicies/deny"), item("org", "o1")),
				level(merge.ScopeParent, "dept", excl("roles/*"), item("dept", "d1")),
				level(merge.ScopeLocal, "team", excl("rolebindings/from-dept"), item("team", "t1"), item("team", "t2")),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := merge.Levels(tt.lineage, globalNS, items)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Levels() =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// wantResult is an expected Result; each conflict is given as substrings it must contain.
type wantResult struct {
	item      merge.Item
	scope     merge.Scope
	conflicts [][]string
}

func checkResults(t *testing.T, got []merge.Result, want []wantResult) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("Merge() returned %d results, want %d:\n got %+v\nwant %+v", len(got), len(want), got, want)
	}
	for i, w := range want {
		g := got[i]
		if !reflect.DeepEqual(g.Item, w.item) || g.Scope != w.scope {
			t.Errorf("result %d = %s %+v, want %s %+v", i, g.Scope, g.Item, w.scope, w.item)
		}
		if len(g.Conflicts) != len(w.conflicts) {
			t.Errorf("result %d (%s) conflicts = %q, want %d", i, g.Item.Name, g.Conflicts, len(w.conflicts))
			continue
		}
		for j, subs := range w.conflicts {
			for _, s := range subs {
				if !strings.Contains(g.Conflicts[j], s) {
					t.Errorf("result %d (%s) conflict %d = %q, want it to contain %q", i, g.Item.Name, j, g.Conflicts[j], s)
				}
			}
		}
	}
}

func TestMerge(t *testing.T) {
	t.Parallel()
	// Levels of the view of "team", whose parent is "dept", whose parent is "org".
	global := func(ex []merge.Exclusion, items ...merge.Item) merge.Level {
		return level(merge.ScopeGlobal, globalNS, ex, items...)
	}
	org := func(ex []merge.Exclusion, items ...merge.Item) merge.Level {
		return level(merge.ScopeParent, "org", ex, items...)
	}
	dept := func(ex []merge.Exclusion, items ...merge.Item) merge.Level {
		return level(merge.ScopeParent, "dept", ex, items...)
	}
	team := func(ex []merge.Exclusion, items ...merge.Item) merge.Level {
		return level(merge.ScopeLocal, "team", ex, items...)
	}
	const (
		g = merge.ScopeGlobal
		p = merge.ScopeParent
		l = merge.ScopeLocal
	)

	tests := []struct {
		name   string
		levels []merge.Level
		want   []wantResult
	}{
		{name: "no levels"},
		{name: "empty levels", levels: []merge.Level{global(nil), team(nil)}},
		{
			name: "disjoint names from every scope, sorted by name",
			levels: []merge.Level{
				global(nil, item(globalNS, "d"), item(globalNS, "b")),
				org(nil, item("org", "e")),
				dept(nil, item("dept", "a")),
				team(nil, item("team", "f"), item("team", "c")),
			},
			want: []wantResult{
				{item: item("dept", "a"), scope: p},
				{item: item(globalNS, "b"), scope: g},
				{item: item("team", "c"), scope: l},
				{item: item(globalNS, "d"), scope: g},
				{item: item("org", "e"), scope: p},
				{item: item("team", "f"), scope: l},
			},
		},
		{
			name:   "local shadows global",
			levels: []merge.Level{global(nil, item(globalNS, "x"), item(globalNS, "y")), team(nil, item("team", "x"))},
			want:   []wantResult{{item: item("team", "x"), scope: l}, {item: item(globalNS, "y"), scope: g}},
		},
		{
			name:   "parent shadows global",
			levels: []merge.Level{global(nil, item(globalNS, "x")), org(nil, item("org", "x")), dept(nil), team(nil)},
			want:   []wantResult{{item: item("org", "x"), scope: p}},
		},
		{
			name: "nearest parent shadows farther parent and global",
			levels: []merge.Level{
				global(nil, item(globalNS, "x")), org(nil, item("org", "x")), dept(nil, item("dept", "x")), team(nil),
			},
			want: []wantResult{{item: item("dept", "x"), scope: p}},
		},
		{
			name: "local over nearest parent over farther over global",
			levels: []merge.Level{
				global(nil, item(globalNS, "x")), org(nil, item("org", "x")), dept(nil, item("dept", "x")), team(nil, item("team", "x")),
			},
			want: []wantResult{{item: item("team", "x"), scope: l}},
		},
		{
			name:   "exclusion by name removes an inherited item",
			levels: []merge.Level{global(nil, item(globalNS, "x"), item(globalNS, "y")), team(excl("rolebindings/x"))},
			want:   []wantResult{{item: item(globalNS, "y"), scope: g}},
		},
		{
			name:   "exclusion of another resource removes nothing",
			levels: []merge.Level{global(nil, item(globalNS, "x")), team(excl("roles/x", "roles/*"))},
			want:   []wantResult{{item: item(globalNS, "x"), scope: g}},
		},
		{
			name: "wildcard exclusion removes every inherited item, not the local ones",
			levels: []merge.Level{
				global(nil, item(globalNS, "a"), item(globalNS, "b")), org(nil, item("org", "c")), dept(nil), team(excl("rolebindings/*"), item("team", "d")),
			},
			want: []wantResult{{item: item("team", "d"), scope: l}},
		},
		{
			name: "exclusion on a parent removes a global item from the child's view",
			levels: []merge.Level{
				global(nil, item(globalNS, "x"), item(globalNS, "y")), org(nil), dept(excl("rolebindings/x")), team(nil),
			},
			want: []wantResult{{item: item(globalNS, "y"), scope: g}},
		},
		{
			name: "exclusion on a nearer parent removes a farther parent's item",
			levels: []merge.Level{
				global(nil), org(nil, item("org", "x")), dept(excl("rolebindings/*")), team(nil),
			},
		},
		{
			name: "exclusion never removes the declaring namespace's own item",
			levels: []merge.Level{
				global(nil, item(globalNS, "x")), org(nil), dept(excl("rolebindings/x"), item("dept", "x")), team(nil),
			},
			want: []wantResult{{item: item("dept", "x"), scope: p}},
		},
		{
			name:   "local exclusion never removes the local item",
			levels: []merge.Level{global(nil, item(globalNS, "x")), team(excl("rolebindings/*"), item("team", "x"))},
			want:   []wantResult{{item: item("team", "x"), scope: l}},
		},
		{
			name: "exclusion never removes items defined below it",
			levels: []merge.Level{
				global(nil, item(globalNS, "x"), item(globalNS, "y")), org(excl("rolebindings/*")), dept(nil, item("dept", "x")), team(nil, item("team", "y")),
			},
			want: []wantResult{{item: item("dept", "x"), scope: p}, {item: item("team", "y"), scope: l}},
		},
		{
			name: "locked global item can't be shadowed by a parent",
			levels: []merge.Level{
				global(nil, locked(globalNS, "x")), org(nil, item("org", "x")), dept(nil), team(nil),
			},
			want: []wantResult{{item: locked(globalNS, "x"), scope: g, conflicts: [][]string{
				{"shadow", "parent org/x", "global source " + globalNS + "/x", "locked"},
			}}},
		},
		{
			name:   "locked global item can't be shadowed locally",
			levels: []merge.Level{global(nil, locked(globalNS, "x")), team(nil, item("team", "x"))},
			want: []wantResult{{item: locked(globalNS, "x"), scope: g, conflicts: [][]string{
				{"shadow", "local team/x", "global source " + globalNS + "/x", "locked"},
			}}},
		},
		{
			name:   "locked global item can't be shadowed by a locked local item",
			levels: []merge.Level{global(nil, locked(globalNS, "x")), team(nil, locked("team", "x"))},
			want: []wantResult{{item: locked(globalNS, "x"), scope: g, conflicts: [][]string{
				{"shadow", "local team/x", "global source " + globalNS + "/x", "locked"},
			}}},
		},
		{
			name: "every blocked shadow is recorded, top down",
			levels: []merge.Level{
				global(nil, locked(globalNS, "x")), org(nil, item("org", "x")), dept(nil, item("dept", "x")), team(nil, item("team", "x")),
			},
			want: []wantResult{{item: locked(globalNS, "x"), scope: g, conflicts: [][]string{
				{"parent org/x", globalNS + "/x"},
				{"parent dept/x", globalNS + "/x"},
				{"local team/x", globalNS + "/x"},
			}}},
		},
		{
			name:   "locked global item can't be excluded by name",
			levels: []merge.Level{global(nil, locked(globalNS, "x")), team(excl("rolebindings/x"))},
			want: []wantResult{{item: locked(globalNS, "x"), scope: g, conflicts: [][]string{
				{"exclusion rolebindings/x", "namespace team", "global source " + globalNS + "/x", "locked"},
			}}},
		},
		{
			name: "locked global item can't be excluded by a wildcard, unlocked ones are",
			levels: []merge.Level{
				global(nil, locked(globalNS, "x"), item(globalNS, "y")), org(nil), dept(excl("rolebindings/*")), team(nil),
			},
			want: []wantResult{{item: locked(globalNS, "x"), scope: g, conflicts: [][]string{
				{"exclusion rolebindings/*", "namespace dept", "global source " + globalNS + "/x"},
			}}},
		},
		{
			name: "exclusion and shadow at one level are both blocked, exclusion first",
			levels: []merge.Level{
				global(nil, locked(globalNS, "x")), org(nil), dept(excl("rolebindings/x"), item("dept", "x")), team(nil),
			},
			want: []wantResult{{item: locked(globalNS, "x"), scope: g, conflicts: [][]string{
				{"exclusion rolebindings/x", "namespace dept"},
				{"shadow", "parent dept/x"},
			}}},
		},
		{
			name: "locked parent item shadows an unlocked global item and holds below",
			levels: []merge.Level{
				global(nil, item(globalNS, "x")), org(nil, locked("org", "x")), dept(excl("rolebindings/x")), team(nil, item("team", "x")),
			},
			want: []wantResult{{item: locked("org", "x"), scope: p, conflicts: [][]string{
				{"exclusion rolebindings/x", "namespace dept", "parent source org/x"},
				{"shadow", "local team/x", "parent source org/x", "locked"},
			}}},
		},
		{
			name: "locked parent item can't be excluded by a wildcard below",
			levels: []merge.Level{
				global(nil), org(nil, locked("org", "x"), item("org", "y")), dept(nil), team(excl("rolebindings/*")),
			},
			want: []wantResult{{item: locked("org", "x"), scope: p, conflicts: [][]string{
				{"exclusion rolebindings/*", "namespace team", "parent source org/x", "locked"},
			}}},
		},
		{
			name: "a lock protects only the locked name",
			levels: []merge.Level{
				global(nil, locked(globalNS, "x"), item(globalNS, "y")), team(nil, item("team", "x"), item("team", "y")),
			},
			want: []wantResult{
				{item: locked(globalNS, "x"), scope: g, conflicts: [][]string{{"local team/x"}}},
				{item: item("team", "y"), scope: l},
			},
		},
		{
			name:   "locked local item wins without conflict",
			levels: []merge.Level{global(nil, item(globalNS, "x")), team(nil, locked("team", "x"))},
			want:   []wantResult{{item: locked("team", "x"), scope: l}},
		},
		{
			name: "excluded name defined again below comes back",
			levels: []merge.Level{
				global(nil, item(globalNS, "x")), org(excl("rolebindings/x")), dept(nil), team(nil, item("team", "x")),
			},
			want: []wantResult{{item: item("team", "x"), scope: l}},
		},
		{
			name: "two items of one name in one namespace: the first is kept",
			levels: []merge.Level{
				global(nil, item(globalNS, "x")),
				team(nil, merge.Item{Namespace: "team", Name: "x", Object: "first"}, merge.Item{Namespace: "team", Name: "x", Object: "second"}),
			},
			want: []wantResult{{item: merge.Item{Namespace: "team", Name: "x", Object: "first"}, scope: l}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			checkResults(t, merge.Merge(resource, tt.levels), tt.want)
		})
	}
}

func TestResultConflict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		conflicts []string
		want      string
	}{
		{name: "none", want: ""},
		{name: "one", conflicts: []string{"a blocked"}, want: "a blocked"},
		{name: "several joined with semicolons", conflicts: []string{"a blocked", "b blocked", "c blocked"}, want: "a blocked; b blocked; c blocked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := (merge.Result{Conflicts: tt.conflicts}).Conflict(); got != tt.want {
				t.Errorf("Conflict() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestResultConflictFromMerge(t *testing.T) {
	t.Parallel()
	got := merge.Merge(resource, []merge.Level{
		level(merge.ScopeGlobal, globalNS, nil, locked(globalNS, "x")),
		level(merge.ScopeLocal, "team", excl("rolebindings/x"), item("team", "x")),
	})
	if len(got) != 1 || len(got[0].Conflicts) != 2 {
		t.Fatalf("Merge() = %+v, want one result with two conflicts", got)
	}
	if want := got[0].Conflicts[0] + "; " + got[0].Conflicts[1]; got[0].Conflict() != want {
		t.Errorf("Conflict() = %q, want %q", got[0].Conflict(), want)
	}
}

// TestView runs Resolve, Levels and Merge together, as a view does.
func TestView(t *testing.T) {
	t.Parallel()
	get := getter(
		ns(globalNS, ""),
		excluding(ns("org", ""), "rolebindings/org-noise"),
		excluding(ns("team-a", "org"), "rolebindings/ci-bot"),
		ns("team-a-dev", "team-a"),
		ns("team-b", "org"),
		nonTenant(ns("sandbox", "org")),
		ns("kube-system", ""),
		ns("loop-1", "loop-2"), ns("loop-2", "loop-1"),
		ns("below-loop", "loop-1"),
		ns("orphan", "ghost"),
	)
	items := itemsOf(
		item(globalNS, "ci-bot"), item(globalNS, "org-noise"), locked(globalNS, "admins"), item(globalNS, "viewers"),
		item("org", "org-admins"), item("org", "viewers"),
		item("team-a", "team-a-devs"), item("team-a", "admins"),
		item("team-a-dev", "ci-bot"),
		item("team-b", "team-b-devs"),
		item("sandbox", "sandbox-own"),
		item("kube-system", "system"),
		item("loop-1", "loop-1-own"), item("loop-2", "loop-2-own"),
		item("below-loop", "below-own"),
		item("orphan", "orphan-own"),
	)
	type view struct {
		source, name string
		scope        merge.Scope
		conflicts    int
	}
	tests := []struct {
		name string
		ns   string
		want []view
	}{
		{
			name: "team with a parent and its own exclusion and a blocked shadow",
			ns:   "team-a",
			want: []view{
				{globalNS, "admins", merge.ScopeGlobal, 1},
				{"org", "org-admins", merge.ScopeParent, 0},
				{"team-a", "team-a-devs", merge.ScopeLocal, 0},
				{"org", "viewers", merge.ScopeParent, 0},
			},
		},
		{
			name: "child inherits its parent's exclusion but defines the excluded name again",
			ns:   "team-a-dev",
			want: []view{
				{globalNS, "admins", merge.ScopeGlobal, 1},
				{"team-a-dev", "ci-bot", merge.ScopeLocal, 0},
				{"org", "org-admins", merge.ScopeParent, 0},
				{"team-a", "team-a-devs", merge.ScopeParent, 0},
				{"org", "viewers", merge.ScopeParent, 0},
			},
		},
		{
			name: "sibling unaffected by team-a's exclusion",
			ns:   "team-b",
			want: []view{
				{globalNS, "admins", merge.ScopeGlobal, 0},
				{globalNS, "ci-bot", merge.ScopeGlobal, 0},
				{"org", "org-admins", merge.ScopeParent, 0},
				{"team-b", "team-b-devs", merge.ScopeLocal, 0},
				{"org", "viewers", merge.ScopeParent, 0},
			},
		},
		{
			name: "non-tenant sees only its own items",
			ns:   "sandbox",
			want: []view{{"sandbox", "sandbox-own", merge.ScopeLocal, 0}},
		},
		{
			name: "excluded namespace sees only its own items",
			ns:   "kube-system",
			want: []view{{"kube-system", "system", merge.ScopeLocal, 0}},
		},
		{
			name: "namespace in a cycle inherits from global only",
			ns:   "loop-1",
			want: []view{
				{globalNS, "admins", merge.ScopeGlobal, 0},
				{globalNS, "ci-bot", merge.ScopeGlobal, 0},
				{"loop-1", "loop-1-own", merge.ScopeLocal, 0},
				{globalNS, "org-noise", merge.ScopeGlobal, 0},
				{globalNS, "viewers", merge.ScopeGlobal, 0},
			},
		},
		{
			name: "namespace below a cycle inherits from the first cycle member",
			ns:   "below-loop",
			want: []view{
				{globalNS, "admins", merge.ScopeGlobal, 0},
				{"below-loop", "below-own", merge.ScopeLocal, 0},
				{globalNS, "ci-bot", merge.ScopeGlobal, 0},
				{"loop-1", "loop-1-own", merge.ScopeParent, 0},
				{globalNS, "org-noise", merge.ScopeGlobal, 0},
				{globalNS, "viewers", merge.ScopeGlobal, 0},
			},
		},
		{
			name: "namespace with a missing parent inherits from global",
			ns:   "orphan",
			want: []view{
				{globalNS, "admins", merge.ScopeGlobal, 0},
				{globalNS, "ci-bot", merge.ScopeGlobal, 0},
				{globalNS, "org-noise", merge.ScopeGlobal, 0},
				{"orphan", "orphan-own", merge.ScopeLocal, 0},
				{globalNS, "viewers", merge.ScopeGlobal, 0},
			},
		},
		{
			name: "nonexistent namespace has an empty view",
			ns:   "ghost",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := merge.Merge(resource, merge.Levels(merge.Resolve(testPolicy, tt.ns, get), globalNS, items))
			var got []view
			for _, r := range res {
				got = append(got, view{r.Item.Namespace, r.Item.Name, r.Scope, len(r.Conflicts)})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("view of %s =\n%+v\nwant\n%+v", tt.ns, got, tt.want)
			}
		})
	}
}

// fakeOverlayer records what MergeWith asks it to merge: its merged object
// names the base and the overlays, and it reports one conflict per locked
// overlay.
type fakeOverlayer struct{}

func (fakeOverlayer) Overlay(base merge.Item, overlays []merge.Item) (any, []string) {
	merged := base.Namespace + "/" + base.Name
	var conflicts []string
	for _, o := range overlays {
		merged += "+" + o.Namespace
		if o.Locked {
			conflicts = append(conflicts, "overlayer: "+o.Namespace)
		}
	}
	return merged, conflicts
}

// overlaying is an item that asks for the Overlay strategy.
func overlaying(it merge.Item) merge.Item {
	it.Overlay = true
	return it
}

func TestMergeWithOverlay(t *testing.T) {
	t.Parallel()
	global := func(ex []merge.Exclusion, items ...merge.Item) merge.Level {
		return level(merge.ScopeGlobal, globalNS, ex, items...)
	}
	org := func(ex []merge.Exclusion, items ...merge.Item) merge.Level {
		return level(merge.ScopeParent, "org", ex, items...)
	}
	team := func(ex []merge.Exclusion, items ...merge.Item) merge.Level {
		return level(merge.ScopeLocal, "team", ex, items...)
	}
	kindOverlay := merge.Options{Strategy: merge.Overlay, Overlayer: fakeOverlayer{}}
	kindReplace := merge.Options{Overlayer: fakeOverlayer{}}

	type want struct {
		item      merge.Item
		scope     merge.Scope
		overlays  []merge.Item
		object    any
		sources   string
		conflicts [][]string
	}
	tests := []struct {
		name   string
		opts   merge.Options
		levels []merge.Level
		want   []want
	}{
		{
			name:   "kind strategy Overlay: the local item overlays the global one",
			opts:   kindOverlay,
			levels: []merge.Level{global(nil, item(globalNS, "x"), item(globalNS, "y")), team(nil, item("team", "x"))},
			want: []want{
				{item: item(globalNS, "x"), scope: merge.ScopeGlobal, overlays: []merge.Item{item("team", "x")}, object: globalNS + "/x+team", sources: "team/x"},
				{item: item(globalNS, "y"), scope: merge.ScopeGlobal},
			},
		},
		{
			name:   "kind strategy Overlay without an Overlayer: Replace",
			opts:   merge.Options{Strategy: merge.Overlay},
			levels: []merge.Level{global(nil, item(globalNS, "x")), team(nil, item("team", "x"))},
			want:   []want{{item: item("team", "x"), scope: merge.ScopeLocal}},
		},
		{
			name: "kind strategy Overlay: three levels, overlays top down",
			opts: kindOverlay,
			levels: []merge.Level{
				global(nil, item(globalNS, "x")), org(nil, locked("org", "x")), team(nil, item("team", "x")),
			},
			want: []want{{
				item: item(globalNS, "x"), scope: merge.ScopeGlobal,
				overlays: []merge.Item{locked("org", "x"), item("team", "x")},
				object:   globalNS + "/x+org+team", sources: "org/x,team/x",
				conflicts: [][]string{{"overlayer: org"}},
			}},
		},
		{
			name:   "kind strategy Overlay: a locked base is overlaid, not shadowed",
			opts:   kindOverlay,
			levels: []merge.Level{global(nil, locked(globalNS, "x")), team(nil, item("team", "x"))},
			want: []want{{
				item: locked(globalNS, "x"), scope: merge.ScopeGlobal,
				overlays: []merge.Item{item("team", "x")}, object: globalNS + "/x+team", sources: "team/x",
			}},
		},
		{
			name:   "base annotated overlay while locked: overlaid",
			opts:   kindReplace,
			levels: []merge.Level{global(nil, overlaying(locked(globalNS, "x"))), team(nil, item("team", "x"))},
			want: []want{{
				item: overlaying(locked(globalNS, "x")), scope: merge.ScopeGlobal,
				overlays: []merge.Item{item("team", "x")}, object: globalNS + "/x+team", sources: "team/x",
			}},
		},
		{
			name:   "base annotated overlay, unlocked: overlaid",
			opts:   kindReplace,
			levels: []merge.Level{global(nil, overlaying(item(globalNS, "x"))), team(nil, item("team", "x"))},
			want: []want{{
				item: overlaying(item(globalNS, "x")), scope: merge.ScopeGlobal,
				overlays: []merge.Item{item("team", "x")}, object: globalNS + "/x+team", sources: "team/x",
			}},
		},
		{
			name:   "lower item asks to overlay an unlocked base: overlaid",
			opts:   kindReplace,
			levels: []merge.Level{global(nil, item(globalNS, "x")), team(nil, overlaying(item("team", "x")))},
			want: []want{{
				item: item(globalNS, "x"), scope: merge.ScopeGlobal,
				overlays: []merge.Item{overlaying(item("team", "x"))}, object: globalNS + "/x+team", sources: "team/x",
			}},
		},
		{
			name:   "lower item asks to overlay a locked base: a blocked shadow",
			opts:   kindReplace,
			levels: []merge.Level{global(nil, locked(globalNS, "x")), team(nil, overlaying(item("team", "x")))},
			want: []want{{
				item: locked(globalNS, "x"), scope: merge.ScopeGlobal,
				conflicts: [][]string{{"shadow by local team/x blocked", "global source " + globalNS + "/x is locked"}},
			}},
		},
		{
			name: "base annotated overlay: later items overlay it even under a locked overlay",
			opts: kindReplace,
			levels: []merge.Level{
				global(nil, overlaying(item(globalNS, "x"))), org(nil, locked("org", "x")), team(nil, overlaying(item("team", "x"))),
			},
			want: []want{{
				item: overlaying(item(globalNS, "x")), scope: merge.ScopeGlobal,
				overlays: []merge.Item{locked("org", "x"), overlaying(item("team", "x"))},
				object:   globalNS + "/x+org+team", sources: "org/x,team/x",
				conflicts: [][]string{{"overlayer: org"}},
			}},
		},
		{
			name: "without the base's consent, a locked overlay blocks a later one asking to overlay",
			opts: kindReplace,
			levels: []merge.Level{
				global(nil, item(globalNS, "x")), org(nil, overlaying(locked("org", "x"))), team(nil, overlaying(item("team", "x"))),
			},
			want: []want{{
				item: item(globalNS, "x"), scope: merge.ScopeGlobal,
				overlays: []merge.Item{overlaying(locked("org", "x"))}, object: globalNS + "/x+org", sources: "org/x",
				conflicts: [][]string{
					{"shadow by local team/x blocked", "global source " + globalNS + "/x is locked"},
					{"overlayer: org"},
				},
			}},
		},
		{
			name:   "lower item not asking, kind Replace: shadows",
			opts:   kindReplace,
			levels: []merge.Level{global(nil, item(globalNS, "x")), team(nil, item("team", "x"))},
			want:   []want{{item: item("team", "x"), scope: merge.ScopeLocal}},
		},
		{
			name: "exclusion of an item whose overlay is locked: blocked",
			opts: kindOverlay,
			levels: []merge.Level{
				global(nil, item(globalNS, "x")), org(nil, locked("org", "x")), team(excl("rolebindings/x")),
			},
			want: []want{{
				item: item(globalNS, "x"), scope: merge.ScopeGlobal,
				overlays: []merge.Item{locked("org", "x")}, object: globalNS + "/x+org", sources: "org/x",
				conflicts: [][]string{{"exclusion rolebindings/x in namespace team blocked"}, {"overlayer: org"}},
			}},
		},
		{
			name: "exclusion of an overlaid item, nothing locked: removed",
			opts: kindOverlay,
			levels: []merge.Level{
				global(nil, item(globalNS, "x")), org(nil, item("org", "x")), team(excl("rolebindings/*")),
			},
		},
		{
			name: "an excluded overlaid item defined again below starts afresh",
			opts: kindOverlay,
			levels: []merge.Level{
				global(nil, item(globalNS, "x")), org(excl("rolebindings/x"), item("org", "x")), team(nil, item("team", "x")),
			},
			want: []want{{
				item: item("org", "x"), scope: merge.ScopeParent,
				overlays: []merge.Item{item("team", "x")}, object: "org/x+team", sources: "team/x",
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := merge.MergeWith(resource, tt.levels, tt.opts)
			if len(got) != len(tt.want) {
				t.Fatalf("MergeWith() = %+v, want %d results", got, len(tt.want))
			}
			for i, w := range tt.want {
				g := got[i]
				if !reflect.DeepEqual(g.Item, w.item) || g.Scope != w.scope {
					t.Errorf("result %d = %s %+v, want %s %+v", i, g.Scope, g.Item, w.scope, w.item)
				}
				if !reflect.DeepEqual(g.Overlays, w.overlays) {
					t.Errorf("result %d overlays = %+v, want %+v", i, g.Overlays, w.overlays)
				}
				if g.Object != w.object {
					t.Errorf("result %d object = %v, want %v", i, g.Object, w.object)
				}
				if s := g.OverlaySources(); s != w.sources {
					t.Errorf("result %d OverlaySources() = %q, want %q", i, s, w.sources)
				}
				if len(g.Conflicts) != len(w.conflicts) {
					t.Errorf("result %d conflicts = %q, want %d matching %q", i, g.Conflicts, len(w.conflicts), w.conflicts)
					continue
				}
				for j, subs := range w.conflicts {
					for _, s := range subs {
						if !strings.Contains(g.Conflicts[j], s) {
							t.Errorf("result %d conflict %d = %q, want it to contain %q", i, j, g.Conflicts[j], s)
						}
					}
				}
			}
		})
	}
}

func TestResultOverlaySources(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		overlays []merge.Item
		want     string
	}{
		{name: "none", want: ""},
		{name: "one", overlays: []merge.Item{item("team", "x")}, want: "team/x"},
		{name: "top down, comma-separated", overlays: []merge.Item{item("org", "x"), item("dept", "x"), item("team", "x")}, want: "org/x,dept/x,team/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := (merge.Result{Overlays: tt.overlays}).OverlaySources(); got != tt.want {
				t.Errorf("OverlaySources() = %q, want %q", got, tt.want)
			}
		})
	}
}
