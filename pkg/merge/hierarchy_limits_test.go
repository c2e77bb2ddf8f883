package merge_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// chain returns namespaces n0 <- n1 <- ... <- n(length-1): n0 is the root.
func chain(length int) []merge.Namespace {
	out := make([]merge.Namespace, length)
	for i := range out {
		parent := ""
		if i > 0 {
			parent = fmt.Sprintf("n%d", i-1)
		}
		out[i] = ns(fmt.Sprintf("n%d", i), parent)
	}
	return out
}

// chainNames returns n(from), n(from-1), ..., n(to): ancestors nearest first.
func chainNames(from, to int) []string {
	var out []string
	for i := from; i >= to; i-- {
		out = append(out, fmt.Sprintf("n%d", i))
	}
	return out
}

func TestResolveMaxDepth(t *testing.T) {
	t.Parallel()
	capped := testPolicy
	capped.MaxDepth = 3
	tests := []struct {
		name          string
		policy        merge.Policy
		namespaces    []merge.Namespace
		view          string
		wantAncestors []string
		wantProblem   *merge.Problem
	}{
		{
			name:          "fewer ancestors than the cap",
			policy:        capped,
			namespaces:    chain(3),
			view:          "n2",
			wantAncestors: chainNames(1, 0),
		},
		{
			name:          "exactly the cap: the root has no parent, no problem",
			policy:        capped,
			namespaces:    chain(4),
			view:          "n3",
			wantAncestors: chainNames(2, 0),
		},
		{
			name:          "one past the cap: the root is cut off",
			policy:        capped,
			namespaces:    chain(5),
			view:          "n4",
			wantAncestors: chainNames(3, 1),
			wantProblem:   &merge.Problem{Reason: merge.ProblemDepthExceeded, Namespace: "n4", Parent: "n0", MaxDepth: 3},
		},
		{
			name:          "far past the cap: the nearest ancestors only",
			policy:        capped,
			namespaces:    chain(100),
			view:          "n99",
			wantAncestors: chainNames(98, 96),
			wantProblem:   &merge.Problem{Reason: merge.ProblemDepthExceeded, Namespace: "n99", Parent: "n95", MaxDepth: 3},
		},
		{
			name:          "a missing parent past the cap is not looked at",
			policy:        capped,
			namespaces:    append(chain(4), ns("n4", "n3"), ns("n5", "n4"))[1:], // no n0: n1's parent is missing
			view:          "n5",
			wantAncestors: chainNames(4, 2),
			wantProblem:   &merge.Problem{Reason: merge.ProblemDepthExceeded, Namespace: "n5", Parent: "n1", MaxDepth: 3},
		},
		{
			name:          "a missing parent within the cap is reported as such",
			policy:        capped,
			namespaces:    chain(4)[1:], // no n0
			view:          "n3",
			wantAncestors: chainNames(2, 1),
			wantProblem:   &merge.Problem{Reason: merge.ProblemMissingParent, Namespace: "n1", Parent: "n0"},
		},
		{
			name:          "no cap: walked to the root",
			policy:        testPolicy,
			namespaces:    chain(100),
			view:          "n99",
			wantAncestors: chainNames(98, 0),
		},
		{
			name:        "a cycle within the cap is a cycle",
			policy:      capped,
			namespaces:  []merge.Namespace{ns("a", "b"), ns("b", "c"), ns("c", "a")},
			view:        "a",
			wantProblem: &merge.Problem{Reason: merge.ProblemCycle, Namespace: "c", Parent: "a", Cycle: []string{"a", "b", "c"}},
		},
		{
			name:          "a cycle longer than the cap is cut at the cap",
			policy:        capped,
			namespaces:    []merge.Namespace{ns("a", "b"), ns("b", "c"), ns("c", "d"), ns("d", "a")},
			view:          "a",
			wantAncestors: []string{"b", "c", "d"},
			wantProblem:   &merge.Problem{Reason: merge.ProblemDepthExceeded, Namespace: "a", Parent: "a", MaxDepth: 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := merge.Resolve(tt.policy, tt.view, getter(tt.namespaces...))
			if !l.Tenant {
				t.Fatalf("%s is not a tenant", tt.view)
			}
			if got := names(l.Ancestors); !reflect.DeepEqual(got, tt.wantAncestors) {
				t.Errorf("Ancestors = %q, want %q", got, tt.wantAncestors)
			}
			if !reflect.DeepEqual(l.Problem, tt.wantProblem) {
				t.Errorf("Problem = %+v, want %+v", l.Problem, tt.wantProblem)
			}
		})
	}
}

// TestResolveMaxDepthReadsNoFarther checks that a capped walk costs
// O(MaxDepth): it never asks for a namespace beyond the cap.
func TestResolveMaxDepthReadsNoFarther(t *testing.T) {
	t.Parallel()
	p := testPolicy
	p.MaxDepth = 32
	all := chain(2000)
	get := getter(all...)
	reads := 0
	counting := func(name string) (*merge.Namespace, bool) {
		reads++
		return get(name)
	}
	l := merge.Resolve(p, "n1999", counting)
	if len(l.Ancestors) != 32 {
		t.Fatalf("%d ancestors, want 32", len(l.Ancestors))
	}
	if want := 1 + 32; reads != want {
		t.Errorf("Resolve read %d namespaces, want %d (the viewer and its 32 ancestors)", reads, want)
	}
}

// at sets a namespace's uid and creation time.
func at(n merge.Namespace, uid string, created time.Time) merge.Namespace {
	n.UID = types.UID(uid)
	n.Created = created
	return n
}

// recording sets the implicit.dev/parent-uid annotation.
func recording(n merge.Namespace, uid string) merge.Namespace {
	n.Annotations[v1alpha1.AnnotationParentUID] = uid
	return n
}

func TestResolveParentUID(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	before, after := t0.Add(-time.Hour), t0.Add(time.Hour)
	tests := []struct {
		name          string
		namespaces    []merge.Namespace
		wantAncestors []string
		wantProblem   *merge.Problem
	}{
		{
			name:          "recorded uid matches",
			namespaces:    []merge.Namespace{recording(at(ns("team", "org"), "t", t0), "org-1"), at(ns("org", ""), "org-1", after)},
			wantAncestors: []string{"org"},
		},
		{
			name:       "recorded uid differs: the parent was created again",
			namespaces: []merge.Namespace{recording(at(ns("team", "org"), "t", t0), "org-1"), at(ns("org", ""), "org-2", before)},
			wantProblem: &merge.Problem{Reason: merge.ProblemParentUIDMismatch, Namespace: "team", Parent: "org",
				RecordedUID: "org-1", ParentUID: "org-2"},
		},
		{
			name:       "empty recorded uid matches no parent",
			namespaces: []merge.Namespace{recording(at(ns("team", "org"), "t", t0), ""), at(ns("org", ""), "org-1", before)},
			wantProblem: &merge.Problem{Reason: merge.ProblemParentUIDMismatch, Namespace: "team", Parent: "org",
				ParentUID: "org-1"},
		},
		{
			name:          "no recorded uid, parent older than the child: labelled before the webhook, inherited",
			namespaces:    []merge.Namespace{at(ns("team", "org"), "t", t0), at(ns("org", ""), "org-1", before)},
			wantAncestors: []string{"org"},
		},
		{
			name:          "no recorded uid, parent created in the same second: inherited",
			namespaces:    []merge.Namespace{at(ns("team", "org"), "t", t0), at(ns("org", ""), "org-1", t0)},
			wantAncestors: []string{"org"},
		},
		{
			name:       "no recorded uid, parent newer than the child: a squatter, not inherited",
			namespaces: []merge.Namespace{at(ns("team", "org"), "t", t0), at(ns("org", ""), "org-2", after)},
			wantProblem: &merge.Problem{Reason: merge.ProblemParentUIDMismatch, Namespace: "team", Parent: "org",
				ParentUID: "org-2"},
		},
		{
			name: "a mismatch up the chain keeps the ancestors below it",
			namespaces: []merge.Namespace{
				recording(at(ns("team", "dept"), "t", t0), "dept-1"),
				recording(at(ns("dept", "org"), "dept-1", before), "org-1"),
				at(ns("org", ""), "org-2", after),
			},
			wantAncestors: []string{"dept"},
			wantProblem: &merge.Problem{Reason: merge.ProblemParentUIDMismatch, Namespace: "dept", Parent: "org",
				RecordedUID: "org-1", ParentUID: "org-2"},
		},
		{
			name:          "the annotation without a parent label is ignored",
			namespaces:    []merge.Namespace{recording(at(ns("team", ""), "t", t0), "org-1"), at(ns("org", ""), "org-2", after)},
			wantAncestors: nil,
		},
		{
			name:        "a missing parent stays MissingParent whatever the annotation",
			namespaces:  []merge.Namespace{recording(at(ns("team", "org"), "t", t0), "org-1")},
			wantProblem: &merge.Problem{Reason: merge.ProblemMissingParent, Namespace: "team", Parent: "org"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := merge.Resolve(testPolicy, "team", getter(tt.namespaces...))
			if got := names(l.Ancestors); !reflect.DeepEqual(got, tt.wantAncestors) {
				t.Errorf("Ancestors = %q, want %q", got, tt.wantAncestors)
			}
			if !reflect.DeepEqual(l.Problem, tt.wantProblem) {
				t.Errorf("Problem = %+v, want %+v", l.Problem, tt.wantProblem)
			}
		})
	}
}

// TestOwnNamespaceNeverTenant: the server adds its own namespace to the
// excluded set; no label makes it a tenant or a parent.
func TestOwnNamespaceNeverTenant(t *testing.T) {
	t.Parallel()
	p := merge.Policy{GlobalNamespace: globalNS, Excluded: map[string]bool{"implicit-system": true}}
	inheriting := func(n merge.Namespace) merge.Namespace {
		n.Labels[v1alpha1.LabelInherit] = "true"
		return n
	}
	own := inheriting(ns("implicit-system", "org"))
	get := getter(own, ns("org", ""), ns("team", "implicit-system"))

	if p.IsTenant(&own) {
		t.Error(`implicit-system labelled implicit.dev/inherit: "true" is a tenant`)
	}
	if l := merge.Resolve(p, "implicit-system", get); l.Tenant || len(l.Ancestors) != 0 {
		t.Errorf("implicit-system: tenant %v, ancestors %q; want a non-tenant with none", l.Tenant, names(l.Ancestors))
	}
	l := merge.Resolve(p, "team", get)
	want := &merge.Problem{Reason: merge.ProblemInvalidParent, Namespace: "team", Parent: "implicit-system"}
	if len(l.Ancestors) != 0 || !reflect.DeepEqual(l.Problem, want) {
		t.Errorf("team below implicit-system: ancestors %q, problem %+v; want none and %+v", names(l.Ancestors), l.Problem, want)
	}
}

func TestProblemStringLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		problem merge.Problem
		want    []string
	}{
		{
			name:    "depth exceeded names the cap and the first ancestor cut off",
			problem: merge.Problem{Reason: merge.ProblemDepthExceeded, Namespace: "n40", Parent: "n7", MaxDepth: 32},
			want:    []string{"n40", "32 ancestors", `"n7"`},
		},
		{
			name:    "uid mismatch names both uids",
			problem: merge.Problem{Reason: merge.ProblemParentUIDMismatch, Namespace: "team", Parent: "org", RecordedUID: "u1", ParentUID: "u2"},
			want:    []string{"team", `"org"`, "u1", "u2", "not inherited"},
		},
		{
			name:    "no recorded uid says how to adopt the parent",
			problem: merge.Problem{Reason: merge.ProblemParentUIDMismatch, Namespace: "team", Parent: "org", ParentUID: "u2"},
			want:    []string{"team", `"org"`, "created after it", v1alpha1.AnnotationParentUID, "removed and set again"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := tt.problem.String()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("String() = %q, want it to contain %q", got, w)
				}
			}
		})
	}
}

// FuzzResolveLimits compares a walk capped at MaxDepth with the uncapped
// walk of the same namespaces, whose uids, creation times and recorded
// parent uids are random too: below the cap they agree exactly; at the cap
// the capped walk has exactly MaxDepth ancestors, each reached through a
// parent that matches (ParentMatches) and is a tenant, without repeats.
//
//	go test -fuzz FuzzResolveLimits ./pkg/merge/
func FuzzResolveLimits(f *testing.F) {
	// Layout: view, max depth, then per namespace n0..n5 a parent byte (as
	// FuzzResolve) and an identity byte: bit 0 the uid, bits 1-2 the
	// creation hour, bits 3-4 the recorded parent uid (none, -0, -1).
	f.Add([]byte{5, 2, 0xff, 0, 0 << 1, 0, 1 << 1, 0, 2 << 1, 0, 3 << 1, 0, 4 << 1, 0})
	f.Add([]byte{3, 1, 1 << 1, 0, 2 << 1, 1 << 3, 0 << 1, 3 << 3, 0xff, 0, 0xff, 0, 0xff, 0})
	f.Add([]byte{2, 3, 0xff, 1, 0 << 1, 2<<1 | 1<<3, 1 << 1, 4, 0xff, 0, 0xff, 0, 0xff, 0})
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &byteReader{b: data}
		view := fuzzNamespaceNames[int(r.next())%6]
		maxDepth := 1 + int(r.next())%4
		var all []merge.Namespace
		for i := range 6 {
			c, id := r.next(), r.next()
			parent := ""
			if j := int(c >> 1); j < len(fuzzNamespaceNames) {
				parent = fuzzNamespaceNames[j]
			}
			n := at(ns(fuzzNamespaceNames[i], parent), fmt.Sprintf("%s-%d", fuzzNamespaceNames[i], id&1),
				base.Add(time.Duration(id>>1&3)*time.Hour))
			if rec := id >> 3 & 3; rec != 0 && parent != "" {
				n = recording(n, fmt.Sprintf("%s-%d", parent, rec-1))
			}
			all = append(all, n)
		}
		get := getter(all...)
		capped := testPolicy
		capped.MaxDepth = maxDepth
		got := merge.Resolve(capped, view, get)
		full := merge.Resolve(testPolicy, view, get)

		if got.Problem == nil || got.Problem.Reason != merge.ProblemDepthExceeded {
			if !reflect.DeepEqual(names(got.Ancestors), names(full.Ancestors)) || !reflect.DeepEqual(got.Problem, full.Problem) {
				t.Fatalf("%s capped at %d: ancestors %q, problem %+v; uncapped: %q, %+v",
					view, maxDepth, names(got.Ancestors), got.Problem, names(full.Ancestors), full.Problem)
			}
			return
		}
		if len(got.Ancestors) != maxDepth || got.Problem.Namespace != view || got.Problem.MaxDepth != maxDepth {
			t.Fatalf("%s: DepthExceeded %+v with %d ancestors, cap %d", view, got.Problem, len(got.Ancestors), maxDepth)
		}
		child, _ := get(view)
		seen := map[string]bool{view: true}
		for _, a := range got.Ancestors {
			if a.Name != child.Labels[v1alpha1.LabelParent] || !merge.ParentMatches(child, a) || !testPolicy.IsTenant(a) || seen[a.Name] {
				t.Fatalf("%s: ancestors %q: %s is not a valid parent of %s", view, names(got.Ancestors), a.Name, child.Name)
			}
			seen[a.Name] = true
			child = a
		}
		if got.Problem.Parent != child.Labels[v1alpha1.LabelParent] {
			t.Fatalf("%s: DepthExceeded names %q, but the last ancestor %s's parent is %q", view, got.Problem.Parent, child.Name, child.Labels[v1alpha1.LabelParent])
		}
	})
}
