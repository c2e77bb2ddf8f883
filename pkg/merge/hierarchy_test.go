package merge_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

const globalNS = "implicit-global"

var testPolicy = merge.Policy{
	GlobalNamespace: globalNS,
	Excluded:        map[string]bool{"kube-system": true, "kube-public": true},
}

// ns builds a namespace; parent "" means no parent label.
func ns(name, parent string) merge.Namespace {
	n := merge.Namespace{Name: name, Labels: map[string]string{}, Annotations: map[string]string{}}
	if parent != "" {
		n.Labels[v1alpha1.LabelParent] = parent
	}
	return n
}

// nonTenant labels a namespace implicit.dev/inherit: "false".
func nonTenant(n merge.Namespace) merge.Namespace {
	n.Labels[v1alpha1.LabelInherit] = "false"
	return n
}

// excluding sets the implicit.dev/exclude annotation on a namespace.
func excluding(n merge.Namespace, exclude string) merge.Namespace {
	n.Annotations[v1alpha1.AnnotationExclude] = exclude
	return n
}

// getter serves the namespaces from a map, like an informer's lister would.
func getter(namespaces ...merge.Namespace) merge.NamespaceGetter {
	m := make(map[string]*merge.Namespace, len(namespaces))
	for i := range namespaces {
		m[namespaces[i].Name] = &namespaces[i]
	}
	return func(name string) (*merge.Namespace, bool) {
		n, ok := m[name]
		return n, ok
	}
}

func names(namespaces []*merge.Namespace) []string {
	var out []string
	for _, n := range namespaces {
		out = append(out, n.Name)
	}
	return out
}

func TestIsTenant(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ns   merge.Namespace
		want bool
	}{
		{name: "ordinary namespace", ns: ns("team-a", ""), want: true},
		{name: "namespace without labels", ns: merge.Namespace{Name: "team-a"}, want: true},
		{name: "namespace with a parent", ns: ns("team-a", "org"), want: true},
		{name: "inherit true", ns: merge.Namespace{Name: "team-a", Labels: map[string]string{v1alpha1.LabelInherit: "true"}}, want: true},
		{name: "global namespace", ns: ns(globalNS, ""), want: false},
		{name: "excluded namespace", ns: ns("kube-system", ""), want: false},
		{name: "other excluded namespace", ns: ns("kube-public", ""), want: false},
		{name: "inherit false", ns: nonTenant(ns("team-a", "")), want: false},
		{name: "inherit false with a parent", ns: nonTenant(ns("team-a", "org")), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := testPolicy.IsTenant(&tt.ns); got != tt.want {
				t.Errorf("IsTenant(%s) = %v, want %v", tt.ns.Name, got, tt.want)
			}
		})
	}
}

func TestIsTenantGlobalNamespaceFollowsPolicy(t *testing.T) {
	t.Parallel()
	p := merge.Policy{GlobalNamespace: "hub-global"}
	if p.IsTenant(&merge.Namespace{Name: "hub-global"}) {
		t.Error("the configured global namespace is a tenant")
	}
	if !p.IsTenant(&merge.Namespace{Name: globalNS}) {
		t.Errorf("%s is not a tenant although the global namespace is hub-global", globalNS)
	}
	if !p.IsTenant(&merge.Namespace{Name: "kube-system"}) {
		t.Error("kube-system is not a tenant although the policy excludes nothing")
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		namespaces    []merge.Namespace
		view          string
		wantNamespace string // "" means Lineage.Namespace is nil
		wantTenant    bool
		wantAncestors []string
		wantProblem   *merge.Problem
	}{
		{
			name:          "no parent",
			namespaces:    []merge.Namespace{ns("team", ""), ns("org", "")},
			view:          "team",
			wantNamespace: "team", wantTenant: true,
		},
		{
			name:          "one parent",
			namespaces:    []merge.Namespace{ns("team", "org"), ns("org", "")},
			view:          "team",
			wantNamespace: "team", wantTenant: true,
			wantAncestors: []string{"org"},
		},
		{
			name:          "grandparent, nearest first",
			namespaces:    []merge.Namespace{ns("team", "dept"), ns("dept", "org"), ns("org", "")},
			view:          "team",
			wantNamespace: "team", wantTenant: true,
			wantAncestors: []string{"dept", "org"},
		},
		{
			name:          "long chain walked to the root",
			namespaces:    []merge.Namespace{ns("team", "dept"), ns("dept", "div"), ns("div", "org"), ns("org", ""), ns("unrelated", "org")},
			view:          "team",
			wantNamespace: "team", wantTenant: true,
			wantAncestors: []string{"dept", "div", "org"},
		},
		{
			name:          "middle of a chain sees only its own ancestors",
			namespaces:    []merge.Namespace{ns("team", "dept"), ns("dept", "org"), ns("org", "")},
			view:          "dept",
			wantNamespace: "dept", wantTenant: true,
			wantAncestors: []string{"org"},
		},
		{
			name:          "missing parent",
			namespaces:    []merge.Namespace{ns("team", "ghost")},
			view:          "team",
			wantNamespace: "team", wantTenant: true,
			wantProblem: &merge.Problem{Reason: merge.ProblemMissingParent, Namespace: "team", Parent: "ghost"},
		},
		{
			name:          "missing grandparent keeps the ancestors up to there",
			namespaces:    []merge.Namespace{ns("team", "dept"), ns("dept", "org"), ns("org", "ghost")},
			view:          "team",
			wantNamespace: "team", wantTenant: true,
			wantAncestors: []string{"dept", "org"},
			wantProblem:   &merge.Problem{Reason: merge.ProblemMissingParent, Namespace: "org", Parent: "ghost"},
		},
		{
			name:          "self parent",
			namespaces:    []merge.Namespace{ns("team", "team")},
			view:          "team",
			wantNamespace: "team", wantTenant: true,
			wantProblem: &merge.Problem{Reason: merge.ProblemInvalidParent, Namespace: "team", Parent: "team"},
		},
		{
			name:          "self parent up the chain",
			namespaces:    []merge.Namespace{ns("team", "dept"), ns("dept", "dept")},
			view:          "team",
			wantNamespace: "team", wantTenant: true,
			wantAncestors: []string{"dept"},
			wantProblem:   &merge.Problem{Reason: merge.ProblemInvalidParent, Namespace: "dept", Parent: "dept"},
		},
		{
			name:          "global namespace as parent",
			namespaces:    []merge.Namespace{ns("team", globalNS), ns(globalNS, "")},
			view:          "team",
			wantNamespace: "team", wantTenant: true,
			wantProblem: &merge.Problem{Reason: merge.ProblemInvalidParent, Namespace: "team", Parent: globalNS},
		},
		{
			name:          "global namespace as grandparent",
			namespaces:    []merge.Namespace{ns("team", "dept"), ns("dept", globalNS), ns(globalNS, "")},
			view:          "team",
			wantNamespace: "team", wantTenant: true,
			wantAncestors: []string{"dept"},
			wantProblem:   &merge.Problem{Reason: merge.ProblemInvalidParent, Namespace: "dept", Parent: globalNS},
		},
		{
			name:          "two-namespace cycle containing the viewing namespace",
			namespaces:    []merge.Namespace{ns("a", "b"), ns("b", "a")},
			view:          "a",
			wantNamespace: "a", wantTenant: true,
			wantProblem: &merge.Problem{Reason: merge.ProblemCycle, Namespace: "b", Parent: "a", Cycle: []string{"a", "b"}},
		},
		{
			name:          "three-namespace cycle seen from its middle",
			namespaces:    []merge.Namespace{ns("a", "b"), ns("b", "c"), ns("c", "a")},
			view:          "b",
			wantNamespace: "b", wantTenant: true,
			wantProblem: &merge.Problem{Reason: merge.ProblemCycle, Namespace: "a", Parent: "b", Cycle: []string{"b", "c", "a"}},
		},
		{
			name:          "namespace below a cycle",
			namespaces:    []merge.Namespace{ns("team", "a"), ns("a", "b"), ns("b", "a")},
			view:          "team",
			wantNamespace: "team", wantTenant: true,
			wantAncestors: []string{"a"},
			wantProblem:   &merge.Problem{Reason: merge.ProblemCycle, Namespace: "b", Parent: "a", Cycle: []string{"a", "b"}},
		},
		{
			name:          "namespace further below a cycle entered midway",
			namespaces:    []merge.Namespace{ns("team", "dept"), ns("dept", "b"), ns("a", "b"), ns("b", "c"), ns("c", "a")},
			view:          "team",
			wantNamespace: "team", wantTenant: true,
			wantAncestors: []string{"dept", "b"},
			wantProblem:   &merge.Problem{Reason: merge.ProblemCycle, Namespace: "a", Parent: "b", Cycle: []string{"b", "c", "a"}},
		},
		{
			name:          "non-tenant parent is invalid",
			namespaces:    []merge.Namespace{ns("team", "dept"), nonTenant(ns("dept", "org")), ns("org", "")},
			view:          "team",
			wantNamespace: "team", wantTenant: true,
			wantProblem: &merge.Problem{Reason: merge.ProblemInvalidParent, Namespace: "team", Parent: "dept"},
		},
		{
			name:          "excluded namespace as parent is invalid: no label reaches into kube-system",
			namespaces:    []merge.Namespace{ns("team", "kube-system"), ns("kube-system", "org"), ns("org", "")},
			view:          "team",
			wantNamespace: "team", wantTenant: true,
			wantProblem: &merge.Problem{Reason: merge.ProblemInvalidParent, Namespace: "team", Parent: "kube-system"},
		},
		{
			name:          "non-tenant grandparent ends the walk with the ancestors below it",
			namespaces:    []merge.Namespace{ns("team", "dept"), ns("dept", "org"), nonTenant(ns("org", "dept"))},
			view:          "team",
			wantNamespace: "team", wantTenant: true,
			wantAncestors: []string{"dept"},
			wantProblem:   &merge.Problem{Reason: merge.ProblemInvalidParent, Namespace: "dept", Parent: "org"},
		},
		{
			name:          "non-tenant parent is invalid before its own missing parent",
			namespaces:    []merge.Namespace{ns("team", "dept"), nonTenant(ns("dept", "ghost"))},
			view:          "team",
			wantNamespace: "team", wantTenant: true,
			wantProblem: &merge.Problem{Reason: merge.ProblemInvalidParent, Namespace: "team", Parent: "dept"},
		},
		{
			name:       "nonexistent viewing namespace",
			namespaces: []merge.Namespace{ns("team", "org"), ns("org", "")},
			view:       "ghost",
		},
		{
			name:          "non-tenant viewing namespace ignores its parent label",
			namespaces:    []merge.Namespace{nonTenant(ns("team", "org")), ns("org", "")},
			view:          "team",
			wantNamespace: "team", wantTenant: false,
		},
		{
			name:          "non-tenant viewing namespace with a bad parent reports nothing",
			namespaces:    []merge.Namespace{nonTenant(ns("team", "ghost"))},
			view:          "team",
			wantNamespace: "team", wantTenant: false,
		},
		{
			name:          "global namespace views only itself",
			namespaces:    []merge.Namespace{ns(globalNS, "org"), ns("org", "")},
			view:          globalNS,
			wantNamespace: globalNS, wantTenant: false,
		},
		{
			name:          "excluded viewing namespace",
			namespaces:    []merge.Namespace{ns("kube-system", "org"), ns("org", "")},
			view:          "kube-system",
			wantNamespace: "kube-system", wantTenant: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			get := getter(tt.namespaces...)
			l := merge.Resolve(testPolicy, tt.view, get)

			switch {
			case tt.wantNamespace == "" && l.Namespace != nil:
				t.Errorf("Namespace = %q, want nil", l.Namespace.Name)
			case tt.wantNamespace != "" && l.Namespace == nil:
				t.Errorf("Namespace = nil, want %q", tt.wantNamespace)
			case tt.wantNamespace != "":
				if want, _ := get(tt.wantNamespace); l.Namespace != want {
					t.Errorf("Namespace = %p (%s), want the getter's %p", l.Namespace, l.Namespace.Name, want)
				}
			}
			if l.Tenant != tt.wantTenant {
				t.Errorf("Tenant = %v, want %v", l.Tenant, tt.wantTenant)
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

func TestProblemString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		problem merge.Problem
		want    []string
	}{
		{
			name:    "cycle lists its members in parent order",
			problem: merge.Problem{Reason: merge.ProblemCycle, Namespace: "c", Parent: "a", Cycle: []string{"a", "b", "c"}},
			want:    []string{"a -> b -> c", "cycle"},
		},
		{
			name:    "missing parent names both",
			problem: merge.Problem{Reason: merge.ProblemMissingParent, Namespace: "team", Parent: "ghost"},
			want:    []string{"team", `"ghost"`, "does not exist"},
		},
		{
			name:    "invalid parent names both",
			problem: merge.Problem{Reason: merge.ProblemInvalidParent, Namespace: "team", Parent: globalNS},
			want:    []string{"team", `"` + globalNS + `"`, "cannot be a parent"},
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
