package merge_test

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// byteReader hands out fuzz bytes one at a time, then zeros.
type byteReader struct{ b []byte }

func (r *byteReader) next() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

var (
	fuzzNames         = []string{"a", "b", "c", "d"}
	fuzzExclNames     = []string{"a", "b", "c", "d", "*"}
	fuzzExclResources = []string{resource, "roles"}
)

// fuzzLevels builds one to five levels from data: global, parents, local (a
// single level is a non-tenant's local level). Every item's Object is unique.
func fuzzLevels(data []byte) []merge.Level {
	return fuzzLevelsFrom(&byteReader{b: data})
}

// fuzzLevelsFrom is fuzzLevels reading from r, which goes on past them.
func fuzzLevelsFrom(r *byteReader) []merge.Level {
	n := 1 + int(r.next())%5
	levels := make([]merge.Level, n)
	for i := range levels {
		lv := &levels[i]
		switch {
		case i == n-1:
			lv.Scope, lv.Namespace = merge.ScopeLocal, "team"
		case i == 0:
			lv.Scope, lv.Namespace = merge.ScopeGlobal, globalNS
		default:
			lv.Scope, lv.Namespace = merge.ScopeParent, fmt.Sprintf("parent-%d", n-1-i) // parent-1 is the nearest
		}
		if lv.Scope != merge.ScopeGlobal {
			for range int(r.next()) % 3 {
				c := r.next()
				lv.Exclusions = append(lv.Exclusions, merge.Exclusion{
					Resource: fuzzExclResources[int(c>>4)%len(fuzzExclResources)],
					Name:     fuzzExclNames[int(c&0x0f)%len(fuzzExclNames)],
				})
			}
		}
		for j := range int(r.next()) % 6 {
			c := r.next()
			lv.Items = append(lv.Items, merge.Item{
				Namespace: lv.Namespace,
				Name:      fuzzNames[int(c>>1)%len(fuzzNames)],
				Locked:    c&1 == 1,
				Object:    fmt.Sprintf("%s#%d", lv.Namespace, j),
			})
		}
	}
	return levels
}

// expected is what the merge rules say about one name.
type expected struct {
	present bool
	level   int
	item    merge.Item
	// conflicts holds, per blocked attempt in order, a substring it must contain.
	conflicts []string
}

// expect states the merge rules for one name declaratively, over the
// levels' items as given.
// expectOf states the merge rules for one name declaratively, with
// named(i) the items of that name on level i, in order:
//   - the topmost locked item wins: nothing below can shadow or exclude it,
//     and each lower item of the name and each lower exclusion matching it
//     is recorded as a conflict, top down, exclusions of a level before its items;
//   - with no locked item, the bottom-most item wins, unless an exclusion on
//     a level below it removes it (a level's exclusions apply to what it
//     inherits, never to its own items or those below).
func expectOf(levels []merge.Level, name string, named func(i int) []merge.Item) expected {
	for i := range levels {
		items := named(i)
		if len(items) == 0 || !items[0].Locked {
			continue
		}
		e := expected{present: true, level: i, item: items[0]}
		for j, below := range levels[i+1:] {
			for _, ex := range below.Exclusions {
				if ex.Matches(resource, name) {
					e.conflicts = append(e.conflicts, fmt.Sprintf("exclusion %s in namespace %s", ex, below.Namespace))
				}
			}
			for range named(i + 1 + j) {
				e.conflicts = append(e.conflicts, fmt.Sprintf("%s %s/%s", below.Scope, below.Namespace, name))
			}
		}
		return e
	}
	for i := len(levels) - 1; i >= 0; i-- {
		items := named(i)
		if len(items) == 0 {
			continue
		}
		it := items[0]
		for _, below := range levels[i+1:] {
			for _, ex := range below.Exclusions {
				if ex.Matches(resource, name) {
					return expected{}
				}
			}
		}
		return expected{present: true, level: i, item: it}
	}
	return expected{}
}

func FuzzMerge(f *testing.F) {
	// Layout: level count - 1; then per level: [exclusion count, exclusions...]
	// (not on global), item count, items. Item byte: name<<1 | locked, so
	// a=0, b=2, c=4, d=6, +1 locked. Exclusion byte: resource<<4 | name, with
	// rolebindings=0x00, roles=0x10 and a=0, b=1, c=2, d=3, *=4.
	for _, seed := range []struct {
		name string
		data []byte
	}{
		{"one empty local level", []byte{}},
		{"non-tenant: local a b c only", []byte{0, 0, 3, 0, 2, 4}},
		{"global a b; local a shadows", []byte{1, 2, 0, 2, 0, 1, 0}},
		{"global locked a; local excludes and shadows a", []byte{1, 1, 1, 1, 0x00, 1, 0}},
		{"global locked a, b; local excludes *, shadows a", []byte{1, 2, 1, 2, 1, 0x04, 1, 0}},
		{"global a; parent excludes a: gone from the child too", []byte{2, 1, 0, 1, 0x00, 0, 0, 0}},
		{"global a; parent excludes a, defines locked a; local excludes, shadows", []byte{2, 1, 0, 1, 0x00, 1, 1, 1, 0x00, 1, 0}},
		{"four levels; a roles exclusion; local excludes its own c", []byte{3, 2, 0, 6, 0, 1, 0, 1, 0x10, 1, 2, 1, 0x02, 1, 4}},
		{"parent a then locked a: first kept; local wildcard", []byte{2, 1, 0, 0, 2, 0, 1, 1, 0x04, 2, 2, 0}},
		{"one name twice in global and parent", []byte{2, 2, 0, 1, 0, 2, 0, 1, 1, 0x00, 1, 0}},
		{"five levels, a lock below exclusions", []byte{4, 3, 0, 2, 4, 0, 1, 4, 2, 0x01, 0x00, 0, 2, 0x01, 0x03, 1, 1, 2, 0x00, 0x02, 0}},
	} {
		f.Add(seed.data)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		levels := fuzzLevels(data)
		checkView(t, levels, merge.Merge(resource, levels), fuzzNames, func(i int, name string) []merge.Item {
			return itemsNamed(levels[i], name)
		})
	})
}

// itemsNamed are a level's items of that name, in order.
func itemsNamed(lv merge.Level, name string) []merge.Item {
	var out []merge.Item
	for _, it := range lv.Items {
		if it.Name == name {
			out = append(out, it)
		}
	}
	return out
}

// checkView checks a view merged from levels against expectOf, for every
// name of all (the only names the view may hold), with named(i, name) the
// items of name level i offers.
func checkView(t *testing.T, levels []merge.Level, got []merge.Result, all []string, named func(i int, name string) []merge.Item) {
	t.Helper()
	byName := map[string]merge.Result{}
	for i, r := range got {
		if i > 0 && got[i-1].Item.Name >= r.Item.Name {
			t.Fatalf("results not strictly sorted by name: %q then %q", got[i-1].Item.Name, r.Item.Name)
		}
		byName[r.Item.Name] = r
	}
	if !sort.SliceIsSorted(got, func(i, j int) bool { return got[i].Item.Name < got[j].Item.Name }) {
		t.Fatalf("results not sorted")
	}
	for name := range byName {
		known := false
		for _, n := range all {
			known = known || n == name
		}
		if !known {
			t.Fatalf("result %q is no source item's name", name)
		}
	}

	for _, name := range all {
		e := expectOf(levels, name, func(i int) []merge.Item { return named(i, name) })
		r, ok := byName[name]
		if ok != e.present {
			t.Fatalf("%s present = %v, want %v; levels %+v; results %+v", name, ok, e.present, levels, got)
		}
		if !ok {
			continue
		}
		if r.Item != e.item || r.Scope != levels[e.level].Scope {
			t.Fatalf("%s = %s %+v, want %s %+v (level %d); levels %+v", name, r.Scope, r.Item, levels[e.level].Scope, e.item, e.level, levels)
		}
		if !r.Item.Locked && len(r.Conflicts) > 0 {
			t.Fatalf("%s: unlocked winner carries conflicts %q", name, r.Conflicts)
		}
		if len(r.Conflicts) != len(e.conflicts) {
			t.Fatalf("%s conflicts = %q, want %d matching %q; levels %+v", name, r.Conflicts, len(e.conflicts), e.conflicts, levels)
		}
		winner := fmt.Sprintf("%s source %s/%s is locked", r.Scope, r.Item.Namespace, name)
		for i, c := range r.Conflicts {
			if !strings.Contains(c, e.conflicts[i]) || !strings.Contains(c, winner) {
				t.Fatalf("%s conflict %d = %q, want it to contain %q and %q", name, i, c, e.conflicts[i], winner)
			}
		}
		if r.Conflict() != strings.Join(r.Conflicts, "; ") {
			t.Fatalf("Conflict() = %q", r.Conflict())
		}
	}
}

func FuzzParseExclusions(f *testing.F) {
	for _, s := range []string{
		"", ",", "rolebindings/ci-bot,networkpolicies/*", " RoleBindings/a , ,roles/b",
		"a/b/c", "/x", "x/", "x", "roles/..", "roles/a%b", "*/*", "a /b",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		got, errs := merge.ParseExclusions(value)
		entries := 0
		for _, e := range strings.Split(value, ",") {
			if strings.TrimSpace(e) != "" {
				entries++
			}
		}
		if len(got)+len(errs) != entries {
			t.Fatalf("ParseExclusions(%q): %d exclusions + %d errors, want %d (one per non-blank entry)", value, len(got), len(errs), entries)
		}
		for _, ex := range got {
			if ex.Resource == "" || ex.Name == "" || strings.Contains(ex.Name, "/") || ex.Resource != strings.ToLower(ex.Resource) {
				t.Fatalf("ParseExclusions(%q) returned malformed %#v", value, ex)
			}
			// What String renders parses back to the same exclusion.
			back, berrs := merge.ParseExclusions(ex.String())
			if len(berrs) != 0 || len(back) != 1 || !reflect.DeepEqual(back[0], ex) {
				t.Fatalf("round trip of %#v: %v, %v", ex, back, berrs)
			}
		}
	})
}

// fuzzNamespaceNames are the candidates for parent labels: six namespaces,
// the global namespace, an excluded one and one that does not exist.
var fuzzNamespaceNames = []string{"n0", "n1", "n2", "n3", "n4", "n5", globalNS, "kube-system", "ghost"}

func FuzzResolve(f *testing.F) {
	// Layout: viewing namespace, then per existing namespace (n0..n5,
	// global, kube-system) one byte: parent<<1 | inherit-false; a parent
	// index past the candidates means no parent label.
	for _, seed := range []struct {
		name string
		data []byte
	}{
		{"no parents", []byte{0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"chain n0 -> n1 -> n2", []byte{0, 1 << 1, 2 << 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"cycle n0 -> n1 -> n0", []byte{0, 1 << 1, 0 << 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"n2 below cycle n0 <-> n1", []byte{2, 1 << 1, 0 << 1, 0 << 1, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"missing parent", []byte{0, 8 << 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"global parent", []byte{0, 6 << 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"self parent", []byte{0, 0 << 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"non-tenant parent", []byte{0, 1 << 1, 2<<1 | 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{"excluded parent", []byte{0, 7 << 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0 << 1}},
		{"nonexistent viewer", []byte{8}},
	} {
		f.Add(seed.data)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		r := &byteReader{b: data}
		view := fuzzNamespaceNames[int(r.next())%len(fuzzNamespaceNames)]
		var all []merge.Namespace
		for _, name := range fuzzNamespaceNames[:len(fuzzNamespaceNames)-1] { // "ghost" never exists
			c := r.next()
			parent := ""
			if i := int(c >> 1); i < len(fuzzNamespaceNames) {
				parent = fuzzNamespaceNames[i]
			}
			n := ns(name, parent)
			if c&1 == 1 {
				n = nonTenant(n)
			}
			all = append(all, n)
		}
		get := getter(all...)
		l := merge.Resolve(testPolicy, view, get)

		viewNS, exists := get(view)
		if !exists {
			if l.Namespace != nil || l.Tenant || l.Ancestors != nil || l.Problem != nil {
				t.Fatalf("nonexistent %s: lineage %+v, want zero", view, l)
			}
			return
		}
		if l.Namespace != viewNS {
			t.Fatalf("Namespace = %v, want the getter's %s", l.Namespace, view)
		}
		if l.Tenant != testPolicy.IsTenant(viewNS) {
			t.Fatalf("Tenant = %v for %+v", l.Tenant, viewNS)
		}
		if !l.Tenant {
			if len(l.Ancestors) != 0 || l.Problem != nil {
				t.Fatalf("non-tenant %s has ancestors %q or problem %+v", view, names(l.Ancestors), l.Problem)
			}
			return
		}

		// The ancestors follow the parent labels, without repeats, and are
		// all tenants: a non-tenant is never a parent.
		seen := map[string]bool{view: true}
		end := viewNS
		for i, a := range l.Ancestors {
			if a.Name != end.Labels[v1alpha1.LabelParent] {
				t.Fatalf("ancestor %d = %s, but %s's parent is %q", i, a.Name, end.Name, end.Labels[v1alpha1.LabelParent])
			}
			if seen[a.Name] {
				t.Fatalf("ancestors %q of %s repeat %s", names(l.Ancestors), view, a.Name)
			}
			seen[a.Name] = true
			if !testPolicy.IsTenant(a) {
				t.Fatalf("ancestors %q of %s include non-tenant %s", names(l.Ancestors), view, a.Name)
			}
			end = a
		}
		parent := end.Labels[v1alpha1.LabelParent]
		parentNS, parentExists := get(parent)

		if l.Problem == nil {
			if parent != "" {
				t.Fatalf("%s: walk of %s stopped at %s, whose parent is %q, without a problem", view, names(l.Ancestors), end.Name, parent)
			}
			return
		}
		switch p := l.Problem; p.Reason {
		case merge.ProblemMissingParent:
			if p.Namespace != end.Name || p.Parent != parent || parentExists {
				t.Fatalf("%s: %+v, but the walk ends at %s with parent %q (exists %v)", view, p, end.Name, parent, parentExists)
			}
		case merge.ProblemInvalidParent:
			invalid := parent == end.Name || parent == globalNS || (parentExists && !testPolicy.IsTenant(parentNS))
			if p.Namespace != end.Name || p.Parent != parent || !invalid {
				t.Fatalf("%s: %+v, but the walk ends at %s with parent %q", view, p, end.Name, parent)
			}
		case merge.ProblemCycle:
			c := p.Cycle
			if len(c) < 2 || p.Parent != c[0] || p.Namespace != c[len(c)-1] {
				t.Fatalf("%s: malformed cycle problem %+v", view, p)
			}
			members := map[string]bool{}
			for i, m := range c {
				n, ok := get(m)
				if !ok || !testPolicy.IsTenant(n) || members[m] || n.Labels[v1alpha1.LabelParent] != c[(i+1)%len(c)] {
					t.Fatalf("%s: %+v is not a cycle of tenants following parent labels", view, p)
				}
				members[m] = true
			}
			if members[view] {
				// Namespaces in a cycle inherit from no parent.
				if c[0] != view || len(l.Ancestors) != 0 {
					t.Fatalf("%s in cycle %q has ancestors %q", view, c, names(l.Ancestors))
				}
			} else if len(l.Ancestors) == 0 || end.Name != c[0] {
				// Below a cycle: up to and including the first member met.
				t.Fatalf("%s below cycle %q has ancestors %q", view, c, names(l.Ancestors))
			} else {
				for _, a := range l.Ancestors[:len(l.Ancestors)-1] {
					if members[a.Name] {
						t.Fatalf("%s below cycle %q: ancestors %q go into the cycle", view, c, names(l.Ancestors))
					}
				}
			}
		default:
			t.Fatalf("%s: unknown problem %+v", view, p)
		}
	})
}

var (
	// fuzzStages are the viewer's implicit.dev/stage label: "" for none.
	fuzzStages = []string{"", "canary", "early", "prod"}
	// fuzzSelectors are canary selectors and the stages each selects ("":
	// no label); a nil stages list marks a malformed one.
	fuzzSelectors = []struct {
		expr   string
		stages []string
	}{
		{v1alpha1.LabelStage + "=canary", []string{"canary"}},
		{v1alpha1.LabelStage + " in (canary,early)", []string{"canary", "early"}},
		{v1alpha1.LabelStage, []string{"canary", "early", "prod"}},
		{"!" + v1alpha1.LabelStage, []string{""}},
		{v1alpha1.LabelStage + " notin (prod)", []string{"", "canary", "early"}},
		{"team=a", nil},
		{"", nil},
	}
	// fuzzFor are what candidates are for: the stable names, "e" that no
	// source has (a staged creation), "k0" (a candidate's own name), and ""
	// (malformed).
	fuzzFor = []string{"a", "b", "c", "d", "e", "k0", ""}
	// fuzzViewNames are every name a view with candidates may hold.
	fuzzViewNames = []string{"a", "b", "c", "d", "e", "k0", "k1", "k2"}
)

// fuzzCandidates adds up to three candidates, k0 to k2, to each level,
// read from r, and gives every item a uid. It returns the stages each
// candidate selects (nil: none, it is malformed). Per level: a count byte,
// then per candidate a byte for<<2 | overlay<<1 | locked and a selector byte.
func fuzzCandidates(t *testing.T, levels []merge.Level, r *byteReader) map[*merge.Candidate][]string {
	selects := map[*merge.Candidate][]string{}
	for i := range levels {
		lv := &levels[i]
		items := append([]merge.Item(nil), lv.Items...) // fuzzLevels' slices are not shared, but stay safe
		for j := range int(r.next()) % 4 {
			c, sb := r.next(), r.next()
			name := fmt.Sprintf("k%d", j)
			forName := fuzzFor[int(c>>2)%len(fuzzFor)]
			sel := fuzzSelectors[int(sb)%len(fuzzSelectors)]
			ann := map[string]string{v1alpha1.AnnotationCandidateFor: forName, v1alpha1.AnnotationCanarySelector: sel.expr}
			cand, err := merge.ParseCandidate(name, ann)
			valid := forName != "" && forName != name && sel.stages != nil
			if cand == nil || (err == nil) != valid {
				t.Fatalf("ParseCandidate(%s, %v) = %+v, %v; want valid %v", name, ann, cand, err, valid)
			}
			if cand.For != forName {
				t.Fatalf("ParseCandidate(%s, %v).For = %q", name, ann, cand.For)
			}
			if valid {
				selects[cand] = sel.stages
			}
			items = append(items, merge.Item{
				Namespace: lv.Namespace, Name: name, Candidate: cand,
				Locked: c&1 == 1, Overlay: c&2 == 2,
				Object: fmt.Sprintf("%s#%s", lv.Namespace, name),
			})
		}
		for j := range items {
			items[j].UID = types.UID(fmt.Sprintf("uid-%v", items[j].Object))
		}
		lv.Items = items
	}
	return selects
}

// stagedNamed is the naive rule of candidates: the items of name that
// level lv offers a viewer of stage, in order.
func stagedNamed(lv merge.Level, name, stage string, selects map[*merge.Candidate][]string) []merge.Item {
	if lv.Scope == merge.ScopeLocal {
		return itemsNamed(lv, name) // its own candidates are real objects there
	}
	var stable, cands []merge.Item
	isCandidateName := false
	for _, it := range lv.Items {
		switch {
		case it.Candidate == nil && it.Name == name:
			stable = append(stable, it)
		case it.Candidate != nil:
			isCandidateName = isCandidateName || it.Name == name
			if it.Candidate.For == name {
				cands = append(cands, it)
			}
		}
	}
	if isCandidateName || len(cands) != 1 || !slices.Contains(selects[cands[0].Candidate], stage) {
		return stable
	}
	c := cands[0]
	s := merge.Item{Namespace: lv.Namespace, Name: name, Object: c.Object, UID: c.UID, Locked: c.Locked,
		Overlay: c.Overlay, Cluster: c.Cluster, FromCandidate: c.Name}
	if len(stable) == 0 {
		return []merge.Item{s}
	}
	s.UID = stable[0].UID
	if stable[0].Locked {
		s.Locked, s.Overlay = true, c.Overlay && stable[0].Overlay
	}
	return append([]merge.Item{s}, stable[1:]...)
}

// withoutCandidates is levels with the candidates removed; everywhere
// but the local level when local is false.
func withoutCandidates(levels []merge.Level, local bool) []merge.Level {
	out := make([]merge.Level, len(levels))
	for i, lv := range levels {
		out[i] = lv
		out[i].Items = nil
		for _, it := range lv.Items {
			if it.Candidate == nil || (!local && lv.Scope == merge.ScopeLocal) {
				out[i].Items = append(out[i].Items, it)
			}
		}
	}
	return out
}

// fuzzLineage is the lineage whose Levels are levels (as fuzzLevels builds
// them), for a viewer of stage, and its items.
func fuzzLineage(levels []merge.Level, stage string) (merge.Lineage, func(string) []merge.Item) {
	byNS := map[string][]merge.Item{}
	namespace := func(lv merge.Level) *merge.Namespace {
		byNS[lv.Namespace] = lv.Items
		n := ns(lv.Namespace, "")
		if len(lv.Exclusions) > 0 {
			parts := make([]string, len(lv.Exclusions))
			for i, ex := range lv.Exclusions {
				parts[i] = ex.String()
			}
			n = excluding(n, strings.Join(parts, ","))
		}
		return &n
	}
	l := merge.Lineage{Namespace: namespace(levels[len(levels)-1]), Tenant: len(levels) > 1}
	if stage != "" {
		l.Namespace.Labels[v1alpha1.LabelStage] = stage
	}
	if l.Tenant {
		namespace(levels[0])
		for i := len(levels) - 2; i > 0; i-- {
			l.Ancestors = append(l.Ancestors, namespace(levels[i]))
		}
	}
	return l, func(namespace string) []merge.Item { return byNS[namespace] }
}

func FuzzStagedMerge(f *testing.F) {
	// Layout: fuzzLevels' bytes, then per level a candidate count and
	// candidates (fuzzCandidates), then the viewer's stage. Candidate byte:
	// for<<2 | overlay<<1 | locked, with a=0, b=4, c=8, d=12, e=16, k0=20,
	// ""=24; selector byte: stage=canary 0, in (canary,early) 1, exists 2,
	// !exists 3, notin (prod) 4, team=a 5, "" 6. Stage: none 0, canary 1,
	// early 2, prod 3.
	for _, seed := range []struct {
		name string
		data []byte
	}{
		{"global a with candidate k0, canary viewer", []byte{1, 1, 0, 0, 0, 1, 0, 0, 0, 1}},
		{"global a with candidate k0, prod viewer", []byte{1, 1, 0, 0, 0, 1, 0, 0, 0, 3}},
		{"locked global a, unlocked candidate; local shadows a", []byte{1, 1, 1, 0, 1, 0, 1, 0, 0, 0, 1}},
		{"unlocked a, locked candidate; local shadows a", []byte{1, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1}},
		{"staged creation of e in a parent; local excludes e", []byte{2, 0, 0, 0, 1, 0x00, 0, 1, 16, 1, 0, 1}},
		{"two candidates for a: neither applies", []byte{1, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 1}},
		{"candidate for a candidate; malformed selector", []byte{1, 1, 0, 0, 0, 2, 20, 0, 0, 5, 0, 1}},
		{"local candidate shows under its own name", []byte{1, 1, 0, 0, 0, 0, 1, 0, 0, 1}},
		{"parent candidate for global a (creation in the parent)", []byte{2, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2}},
	} {
		f.Add(seed.data)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		r := &byteReader{b: data}
		levels := fuzzLevelsFrom(r)
		selects := fuzzCandidates(t, levels, r)
		stage := fuzzStages[int(r.next())%len(fuzzStages)]
		viewer := ns("team", "")
		if stage != "" {
			viewer.Labels[v1alpha1.LabelStage] = stage
		}
		before := make([]merge.Level, len(levels))
		for i, lv := range levels {
			before[i] = lv
			before[i].Items = append([]merge.Item(nil), lv.Items...)
		}

		staged := merge.StageLevels(levels, &viewer)
		if !reflect.DeepEqual(levels, before) {
			t.Fatalf("StageLevels changed its input levels")
		}
		got := merge.Merge(resource, staged)
		named := func(i int, name string) []merge.Item { return stagedNamed(levels[i], name, stage, selects) }
		checkView(t, levels, got, fuzzViewNames, named)

		// The view without candidates follows the plain rules, and every
		// name whose items no candidate changed is the same in both.
		plain := withoutCandidates(levels, true)
		gotPlain := merge.Merge(resource, plain)
		checkView(t, plain, gotPlain, fuzzNames, func(i int, name string) []merge.Item { return itemsNamed(plain[i], name) })
		view, viewPlain := map[string]merge.Result{}, map[string]merge.Result{}
		for _, r := range got {
			view[r.Item.Name] = r
			if r.Item.Candidate != nil && r.Scope != merge.ScopeLocal {
				t.Fatalf("candidate %s shows under its own name in an inherited view", r.Item.Name)
			}
			if r.Candidates() != r.Item.FromCandidate {
				t.Fatalf("%s: Candidates() = %q, item from candidate %q", r.Item.Name, r.Candidates(), r.Item.FromCandidate)
			}
		}
		for _, r := range gotPlain {
			viewPlain[r.Item.Name] = r
		}
		for _, name := range fuzzNames {
			same := true
			for i := range levels {
				same = same && reflect.DeepEqual(named(i, name), itemsNamed(plain[i], name))
			}
			if same && !reflect.DeepEqual(view[name], viewPlain[name]) {
				t.Fatalf("%s: no candidate applies, yet the view has %+v, without candidates %+v", name, view[name], viewPlain[name])
			}
		}

		// Explain follows the staged view name by name (when each level
		// has one item of a name, as namespaces do), and hides what
		// unstaged levels hide.
		once := true
		for _, lv := range staged {
			seen := map[string]bool{}
			for _, it := range lv.Items {
				once = once && !seen[it.Name]
				seen[it.Name] = true
			}
		}
		for _, name := range fuzzViewNames {
			r, inView := view[name]
			if e := merge.Explain(resource, name, staged, merge.Options{}); once && ((e.Result != nil) != inView || (inView && !reflect.DeepEqual(*e.Result, r))) {
				t.Fatalf("%s: Explain's result %+v, the view's %+v (in view: %v)", name, e.Result, r, inView)
			}
			for _, le := range merge.Explain(resource, name, levels, merge.Options{}).Levels {
				if le.Item != nil && le.Item.Candidate != nil && le.Scope != merge.ScopeLocal {
					t.Fatalf("%s: Explain traces the unstaged candidate %+v", name, le.Item)
				}
			}
		}

		// Levels that were not staged hide inherited candidates.
		if unstaged, hiding := merge.Merge(resource, levels), merge.Merge(resource, withoutCandidates(levels, false)); !reflect.DeepEqual(unstaged, hiding) {
			t.Fatalf("unstaged candidates show in the view:\n%+v\nwant\n%+v", unstaged, hiding)
		}

		// Levels stages what it builds. A non-tenant's one level has no
		// exclusions: it inherits nothing.
		l, items := fuzzLineage(levels, stage)
		want := levels
		if len(levels) == 1 {
			want = []merge.Level{levels[0]}
			want[0].Exclusions = nil
		}
		if fromLineage := merge.Levels(l, globalNS, items); !reflect.DeepEqual(fromLineage, merge.StageLevels(want, l.Namespace)) {
			t.Fatalf("Levels =\n%+v\nwant the staged levels\n%+v", fromLineage, staged)
		}
	})
}
