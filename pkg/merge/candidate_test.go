package merge_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

func TestParseCandidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		annotations map[string]string
		wantNil     bool
		// wantErr holds substrings of the error; none: no error.
		wantErr []string
		// selects and skips are stages the selector must match and not ("" for no label).
		selects, skips []string
	}{
		{name: "ordinary source", annotations: map[string]string{"other": "x"}, wantNil: true},
		{name: "nil annotations", wantNil: true},
		{
			name:        "equality",
			annotations: cand("rb", v1alpha1.LabelStage+"=canary"),
			selects:     []string{"canary"}, skips: []string{"", "early", "prod"},
		},
		{
			name:        "set",
			annotations: cand("rb", v1alpha1.LabelStage+" in (canary,early)"),
			selects:     []string{"canary", "early"}, skips: []string{"", "prod"},
		},
		{
			name:        "not in: namespaces without a stage too",
			annotations: cand("rb", v1alpha1.LabelStage+" notin (prod)"),
			selects:     []string{"", "canary"}, skips: []string{"prod"},
		},
		{
			name:        "two requirements on the stage key",
			annotations: cand("rb", v1alpha1.LabelStage+","+v1alpha1.LabelStage+"!=prod"),
			selects:     []string{"canary"}, skips: []string{"", "prod"},
		},
		{
			name:        "another key is refused, by name",
			annotations: cand("rb", "team=a"),
			wantErr:     []string{v1alpha1.AnnotationCanarySelector, `"team"`, "may only use the namespace label " + v1alpha1.LabelStage},
		},
		{
			name:        "one other key among stage keys",
			annotations: cand("rb", v1alpha1.LabelStage+"=canary,env in (dev)"),
			wantErr:     []string{`selects on "env"`},
		},
		{
			name:        "empty selector would select every namespace",
			annotations: cand("rb", ""),
			wantErr:     []string{"is empty, which would select every namespace", "promote"},
		},
		{
			name:        "selector missing",
			annotations: map[string]string{v1alpha1.AnnotationCandidateFor: "rb"},
			wantErr:     []string{v1alpha1.AnnotationCanarySelector + " is missing"},
		},
		{
			name:        "selector does not parse",
			annotations: cand("rb", v1alpha1.LabelStage+" in (canary"),
			wantErr:     []string{"is not a label selector"},
		},
		{
			name:        "candidate-for missing",
			annotations: map[string]string{v1alpha1.AnnotationCanarySelector: v1alpha1.LabelStage + "=canary"},
			wantErr:     []string{v1alpha1.AnnotationCandidateFor + " must name the source"},
		},
		{
			name:        "candidate-for in another namespace",
			annotations: cand("other/rb", v1alpha1.LabelStage+"=canary"),
			wantErr:     []string{"its own namespace only"},
		},
		{
			name:        "candidate-for itself",
			annotations: cand("rb.next", v1alpha1.LabelStage+"=canary"),
			wantErr:     []string{"the candidate's own name"},
		},
		{
			name:        "candidate-for not a name",
			annotations: cand("..", v1alpha1.LabelStage+"=canary"),
			wantErr:     []string{"is not a valid name"},
		},
		{
			name:        "both wrong: both said",
			annotations: cand("", "team=a"),
			wantErr:     []string{"must name the source", `selects on "team"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := merge.ParseCandidate("rb.next", tt.annotations)
			if tt.wantNil {
				if c != nil || err != nil {
					t.Fatalf("ParseCandidate = %+v, %v; want nil, nil", c, err)
				}
				return
			}
			if c == nil {
				t.Fatalf("ParseCandidate = nil, %v; want a candidate", err)
			}
			if c.For != tt.annotations[v1alpha1.AnnotationCandidateFor] {
				t.Errorf("For = %q", c.For)
			}
			if len(tt.wantErr) == 0 && err != nil {
				t.Fatalf("ParseCandidate: %v", err)
			}
			for _, s := range tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), s) {
					t.Errorf("error = %v, want it to contain %q", err, s)
				}
			}
			if err != nil {
				// A malformed candidate reaches no one.
				tt.skips = append(tt.skips, "", "canary", "early", "prod")
			}
			for _, s := range tt.selects {
				if !c.Selector.Matches(stageSet(s)) {
					t.Errorf("selector %s does not select stage %q", c.Selector, s)
				}
			}
			for _, s := range tt.skips {
				if c.Selector.Matches(stageSet(s)) {
					t.Errorf("selector %s selects stage %q", c.Selector, s)
				}
			}
		})
	}
}

func cand(forName, selector string) map[string]string {
	return map[string]string{v1alpha1.AnnotationCandidateFor: forName, v1alpha1.AnnotationCanarySelector: selector}
}

func stageSet(stage string) labels.Set {
	if stage == "" {
		return labels.Set{}
	}
	return labels.Set{v1alpha1.LabelStage: stage}
}

// withUID gives an item the uid "uid-<namespace>/<name>".
func withUID(it merge.Item) merge.Item {
	it.UID = types.UID("uid-" + it.Namespace + "/" + it.Name)
	return it
}

// candidateItem is a candidate source item, its Object naming it.
func candidateItem(t *testing.T, namespace, name, forName, selector string) merge.Item {
	t.Helper()
	c, err := merge.ParseCandidate(name, cand(forName, selector))
	if c == nil {
		t.Fatalf("ParseCandidate(%s): nil", name)
	}
	_ = err // malformed candidates are items too
	return withUID(merge.Item{Namespace: namespace, Name: name, Object: namespace + "/" + name, Candidate: c})
}

// viewer is namespace team with that stage ("" for none).
func viewer(stage string) *merge.Namespace {
	n := ns("team", "org")
	if stage != "" {
		n.Labels[v1alpha1.LabelStage] = stage
	}
	return &n
}

// render writes a view as "name=object" entries: a trailing "!" for a
// locked item, "~" for one that asks to overlay, "<candidate" for one built
// from a candidate, "@uid", "(scope)" and, after "|", the conflicts.
func render(results []merge.Result) []string {
	var out []string
	for _, r := range results {
		s := fmt.Sprintf("%s=%v", r.Item.Name, r.Item.Object)
		if r.Item.Locked {
			s += "!"
		}
		if r.Item.Overlay {
			s += "~"
		}
		if r.Item.FromCandidate != "" {
			s += "<" + r.Item.FromCandidate
		}
		s += fmt.Sprintf("@%s(%s)", r.Item.UID, r.Scope)
		if len(r.Conflicts) > 0 {
			s += "|" + r.Conflict()
		}
		out = append(out, s)
	}
	return out
}

func TestStageLevels(t *testing.T) {
	t.Parallel()
	const canary = v1alpha1.LabelStage + "=canary"
	g := func(items ...merge.Item) merge.Level { return level(merge.ScopeGlobal, globalNS, nil, items...) }
	org := func(ex []merge.Exclusion, items ...merge.Item) merge.Level {
		return level(merge.ScopeParent, "org", ex, items...)
	}
	team := func(ex []merge.Exclusion, items ...merge.Item) merge.Level {
		return level(merge.ScopeLocal, "team", ex, items...)
	}
	gx, gxLocked := withUID(item(globalNS, "x")), withUID(locked(globalNS, "x"))
	next := candidateItem(t, globalNS, "x.next", "x", canary)
	nextLocked := next
	nextLocked.Locked = true
	gxLockedOverlay := gxLocked
	gxLockedOverlay.Overlay = false
	nextOverlay := next
	nextOverlay.Overlay = true

	tests := []struct {
		name   string
		levels []merge.Level
		// want is the view per stage of the viewer, rendered.
		want map[string][]string
	}{
		{
			name:   "the canary sees the candidate under the stable name and uid; others the stable source",
			levels: []merge.Level{g(gx, next), team(nil)},
			want: map[string][]string{
				"canary": {"x=implicit-global/x.next<x.next@uid-implicit-global/x(global)"},
				"prod":   {"x=implicit-global/x@uid-implicit-global/x(global)"},
				"":       {"x=implicit-global/x@uid-implicit-global/x(global)"},
			},
		},
		{
			name:   "its own namespace sees both, each under its own name",
			levels: []merge.Level{team(nil, withUID(item("team", "x")), candidateItem(t, "team", "x.next", "x", canary))},
			want: map[string][]string{
				"canary": {"x=team/x@uid-team/x(local)", "x.next=team/x.next@uid-team/x.next(local)"},
				"prod":   {"x=team/x@uid-team/x(local)", "x.next=team/x.next@uid-team/x.next(local)"},
			},
		},
		{
			name:   "a candidate of a locked source is locked: a local shadow is blocked",
			levels: []merge.Level{g(gxLocked, next), team(nil, withUID(item("team", "x")))},
			want: map[string][]string{
				"canary": {"x=implicit-global/x.next!<x.next@uid-implicit-global/x(global)|shadow by local team/x blocked: global source implicit-global/x is locked"},
				"prod":   {"x=implicit-global/x!@uid-implicit-global/x(global)|shadow by local team/x blocked: global source implicit-global/x is locked"},
			},
		},
		{
			name:   "a locked candidate of an unlocked source locks the canaries' item",
			levels: []merge.Level{g(gx, nextLocked), team(nil, withUID(item("team", "x")))},
			want: map[string][]string{
				"canary": {"x=implicit-global/x.next!<x.next@uid-implicit-global/x(global)|shadow by local team/x blocked: global source implicit-global/x is locked"},
				"prod":   {"x=team/x@uid-team/x(local)"},
			},
		},
		{
			name:   "a candidate can't open a locked source to overlays",
			levels: []merge.Level{g(gxLockedOverlay, nextOverlay), team(nil)},
			want: map[string][]string{
				"canary": {"x=implicit-global/x.next!<x.next@uid-implicit-global/x(global)"},
			},
		},
		{
			name:   "an unlocked source's candidate keeps its overlay request",
			levels: []merge.Level{g(gx, nextOverlay), team(nil)},
			want: map[string][]string{
				"canary": {"x=implicit-global/x.next~<x.next@uid-implicit-global/x(global)"},
			},
		},
		{
			name:   "exclusions apply to the candidate as to the source",
			levels: []merge.Level{g(gx, next), team(excl("rolebindings/x"))},
			want:   map[string][]string{"canary": nil, "prod": nil},
		},
		{
			name:   "a staged creation takes the candidate's uid",
			levels: []merge.Level{g(candidateItem(t, globalNS, "y.next", "y", canary)), team(nil)},
			want: map[string][]string{
				"canary": {"y=implicit-global/y.next<y.next@uid-implicit-global/y.next(global)"},
				"prod":   nil,
			},
		},
		{
			name: "a parent's candidate for the global name stages a creation in the parent, shadowing the global source",
			levels: []merge.Level{
				g(gx),
				org(nil, candidateItem(t, "org", "x.next", "x", canary)),
				team(nil),
			},
			want: map[string][]string{
				"canary": {"x=org/x.next<x.next@uid-org/x.next(parent)"},
				"prod":   {"x=implicit-global/x@uid-implicit-global/x(global)"},
			},
		},
		{
			name: "a parent's staged creation can't shadow a locked global source",
			levels: []merge.Level{
				g(gxLocked),
				org(nil, candidateItem(t, "org", "x.next", "x", canary)),
				team(nil),
			},
			want: map[string][]string{
				"canary": {"x=implicit-global/x!@uid-implicit-global/x(global)|shadow by parent org/x blocked: global source implicit-global/x is locked"},
			},
		},
		{
			name:   "two candidates for one source: neither applies, neither shows",
			levels: []merge.Level{g(gx, next, candidateItem(t, globalNS, "x.other", "x", canary)), team(nil)},
			want: map[string][]string{
				"canary": {"x=implicit-global/x@uid-implicit-global/x(global)"},
			},
		},
		{
			name:   "a malformed candidate reaches no one and never shows",
			levels: []merge.Level{g(gx, candidateItem(t, globalNS, "x.next", "x", "team=a")), team(nil)},
			want: map[string][]string{
				"canary": {"x=implicit-global/x@uid-implicit-global/x(global)"},
				"":       {"x=implicit-global/x@uid-implicit-global/x(global)"},
			},
		},
		{
			name:   "a candidate for a candidate does not apply",
			levels: []merge.Level{g(gx, next, candidateItem(t, globalNS, "x.next2", "x.next", canary)), team(nil)},
			want: map[string][]string{
				"canary": {"x=implicit-global/x.next<x.next@uid-implicit-global/x(global)"},
			},
		},
		{
			name:   "the selector matches the viewer's stage, not the candidate's namespace's",
			levels: []merge.Level{g(gx, candidateItem(t, globalNS, "x.next", "x", "!"+v1alpha1.LabelStage)), team(nil)},
			want: map[string][]string{
				"":       {"x=implicit-global/x.next<x.next@uid-implicit-global/x(global)"},
				"canary": {"x=implicit-global/x@uid-implicit-global/x(global)"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for stage, want := range tt.want {
				before := fmt.Sprintf("%+v", tt.levels)
				got := render(merge.Merge(resource, merge.StageLevels(tt.levels, viewer(stage))))
				if !reflect.DeepEqual(got, want) {
					t.Errorf("stage %q: view =\n%q\nwant\n%q", stage, got, want)
				}
				if after := fmt.Sprintf("%+v", tt.levels); after != before {
					t.Errorf("StageLevels changed its input:\n%s\n%s", before, after)
				}
			}
		})
	}
}

func TestStageLevelsWithoutCandidates(t *testing.T) {
	t.Parallel()
	levels := []merge.Level{
		level(merge.ScopeGlobal, globalNS, nil, item(globalNS, "x")),
		level(merge.ScopeLocal, "team", nil, candidateItem(t, "team", "x.next", "x", v1alpha1.LabelStage+"=canary")),
	}
	got := merge.StageLevels(levels, viewer("canary"))
	if &got[0] != &levels[0] {
		t.Errorf("StageLevels copied levels that have no inherited candidate")
	}
}

func TestLevelsStagesForTheViewer(t *testing.T) {
	t.Parallel()
	canaryTeam := ns("team", "org")
	canaryTeam.Labels[v1alpha1.LabelStage] = "canary"
	prodTeam := ns("team", "org")
	prodTeam.Labels[v1alpha1.LabelStage] = "prod"
	org := ns("org", "")
	items := itemsOf(
		withUID(item(globalNS, "x")), candidateItem(t, globalNS, "x.next", "x", v1alpha1.LabelStage+"=canary"),
		withUID(item("org", "y")), candidateItem(t, "org", "y.next", "y", v1alpha1.LabelStage+" in (canary,prod)"),
	)
	for _, tt := range []struct {
		name string
		team merge.Namespace
		want []string
	}{
		{"canary", canaryTeam, []string{
			"x=implicit-global/x.next<x.next@uid-implicit-global/x(global)",
			"y=org/y.next<y.next@uid-org/y(parent)",
		}},
		{"prod", prodTeam, []string{
			"x=implicit-global/x@uid-implicit-global/x(global)",
			"y=org/y.next<y.next@uid-org/y(parent)",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := merge.Resolve(testPolicy, "team", getter(tt.team, org))
			got := render(merge.Merge(resource, merge.Levels(l, globalNS, items)))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("view =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
	// The parent's own view shows its candidate under its own name.
	l := merge.Resolve(testPolicy, "org", getter(org))
	got := render(merge.Merge(resource, merge.Levels(l, globalNS, items)))
	want := []string{
		"x=implicit-global/x@uid-implicit-global/x(global)",
		"y=org/y@uid-org/y(local)",
		"y.next=org/y.next@uid-org/y.next(local)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("org's view =\n%q\nwant\n%q", got, want)
	}
}

func TestResultCandidates(t *testing.T) {
	t.Parallel()
	from := func(it merge.Item, c string) merge.Item {
		it.FromCandidate = c
		return it
	}
	tests := []struct {
		name string
		r    merge.Result
		want string
	}{
		{name: "none", r: merge.Result{Item: item(globalNS, "x")}, want: ""},
		{name: "the base", r: merge.Result{Item: from(item(globalNS, "x"), "x.next")}, want: "x.next"},
		{
			name: "base and an overlay",
			r: merge.Result{Item: from(item(globalNS, "x"), "x.next"),
				Overlays: []merge.Item{item("org", "x"), from(item("team", "x"), "x.canary")}},
			want: "x.next,x.canary",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.r.Candidates(); got != tt.want {
				t.Errorf("Candidates() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestExplainCandidate(t *testing.T) {
	t.Parallel()
	levels := []merge.Level{
		level(merge.ScopeGlobal, globalNS, nil, withUID(item(globalNS, "x")), candidateItem(t, globalNS, "x.next", "x", v1alpha1.LabelStage+"=canary")),
		level(merge.ScopeLocal, "team", nil),
	}
	e := merge.Explain(resource, "x", merge.StageLevels(levels, viewer("canary")), merge.Options{})
	if w := e.Winner(); w != 0 || e.Result == nil {
		t.Fatalf("winner %d, result %v", w, e.Result)
	}
	if got, want := e.Levels[0].Message(), "implicit-global/x is the view's item, in the version of its candidate x.next"; got != want {
		t.Errorf("Message() = %q, want %q", got, want)
	}
	// Unstaged, the candidate is no item of the view under its own name.
	if e := merge.Explain(resource, "x.next", levels, merge.Options{}); e.Winner() != -1 || e.Result != nil || e.Levels[0].Item != nil {
		t.Errorf("unstaged candidate explained as %+v", e)
	}
}

// TestCanaryClusters: implicit.dev/canary-clusters names the member clusters
// a candidate exists in; InCluster marks it out of any other, where it
// reaches no stage, and InAnyCluster gives it back as declared.
func TestCanaryClusters(t *testing.T) {
	t.Parallel()
	withClusters := func(sel string) map[string]string {
		a := cand("rb", v1alpha1.LabelStage+"=canary")
		a[v1alpha1.AnnotationCanaryClusters] = sel
		return a
	}
	for _, tt := range []struct {
		name, selector string
		wantErr        string
	}{
		{name: "empty", selector: "", wantErr: "would select every member cluster"},
		{name: "malformed", selector: "a in (", wantErr: "is not a label selector"},
	} {
		c, err := merge.ParseCandidate("rb.next", withClusters(tt.selector))
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), v1alpha1.AnnotationCanaryClusters) {
			t.Errorf("%s: error %v, want one naming %s that says %q", tt.name, err, v1alpha1.AnnotationCanaryClusters, tt.wantErr)
		}
		if c == nil || c.Clusters == nil || c.Clusters.Matches(labels.Set{"x": "y"}) || c.Selector.Matches(labels.Set{v1alpha1.LabelStage: "canary"}) {
			t.Errorf("%s: a malformed candidate must reach no cluster and no stage: %+v", tt.name, c)
		}
	}
	only, err := merge.ParseCandidate("rb", map[string]string{v1alpha1.AnnotationCanaryClusters: "cluster-stage=canary"})
	if err == nil || only == nil {
		t.Errorf("canary-clusters without candidate-for: %v, %v; want a malformed candidate", only, err)
	}

	c, err := merge.ParseCandidate("rb.next", withClusters("cluster-stage in (canary,early)"))
	if err != nil {
		t.Fatal(err)
	}
	canary := labels.Set{v1alpha1.LabelStage: "canary"}
	for _, tt := range []struct {
		name       string
		registered bool
		labels     labels.Set
		in         bool
	}{
		{"selected", true, labels.Set{"cluster-stage": "canary"}, true},
		{"not selected", true, labels.Set{"cluster-stage": "main"}, false},
		{"registered without labels", true, nil, false},
		{"not registered: no member of a fleet", false, labels.Set{"cluster-stage": "canary"}, false},
	} {
		got := c.InCluster(tt.registered, tt.labels)
		if got.OutOfCluster == tt.in || got.Selector.Matches(canary) != tt.in {
			t.Errorf("%s: OutOfCluster %v, selects the canary stage %v; want in the cluster %v", tt.name, got.OutOfCluster, got.Selector.Matches(canary), tt.in)
		}
		if back := got.InAnyCluster(); back.OutOfCluster || !back.Selector.Matches(canary) {
			t.Errorf("%s: InAnyCluster %+v, want the candidate as declared", tt.name, back)
		}
		if c.OutOfCluster || !c.Selector.Matches(canary) {
			t.Fatalf("%s: InCluster modified its receiver", tt.name)
		}
	}
	if plain, _ := merge.ParseCandidate("rb.next", cand("rb", v1alpha1.LabelStage+"=canary")); plain.InCluster(false, nil) != plain {
		t.Error("a candidate without canary-clusters is one in every cluster, fleet or not")
	}
}
