package watchmux_test

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// staged is the hierarchy with stages: team-a is a canary, team-b in prod,
// team-a-1 and solo have no stage; the global g has a candidate g.next for
// the canaries.
func staged(more ...step) []step {
	return append([]step{
		addNS(namespace(global)),
		addNS(namespace("org")),
		addNS(namespace("team-a", parent("org"), stage("canary"))),
		addNS(namespace("team-b", parent("org"), stage("prod"))),
		addNS(namespace("team-a-1", parent("team-a"))),
		addNS(namespace("solo")),
		putRB(global, "g"),
		putRB(global, "g.next", candidateFor("g", v1alpha1.LabelStage+"=canary")),
	}, more...)
}

// stagedEvents feeds setup before the mux syncs, then change, and returns
// the change's events, as an all-namespaces watch resumed from before it
// sees them, described with the candidate and source uid of each item,
// sorted.
func stagedEvents(t *testing.T, setup []step, change ...step) []string {
	t.Helper()
	m := newMux(watchmux.Options{})
	for _, s := range setup {
		s(m)
	}
	m.MarkSynced()
	return changeEvents(t, m, change...)
}

// changeEvents applies change to a synced m and returns its events, as
// stagedEvents does.
func changeEvents(t *testing.T, m *watchmux.Mux, change ...step) []string {
	t.Helper()
	before := currentRV(t, m)
	for _, s := range change {
		s(m)
	}
	n := int(currentRV(t, m) - before)
	f := watchAndFollow(t, m, watchmux.WatchOptions{ResourceVersion: rvText(before)})
	var out []string
	for _, ev := range f.waitFor(t, n) {
		out = append(out, describeStaged(ev))
	}
	slices.Sort(out)
	return out
}

// describeStaged renders an event with its item's candidate and uid.
func describeStaged(ev watch.Event) string {
	acc, _ := meta.Accessor(ev.Object)
	a := acc.GetAnnotations()
	s := describeEvent(ev) + " uid=" + a[v1alpha1.AnnotationSourceUID]
	if c := a[v1alpha1.AnnotationCandidate]; c != "" {
		s += " candidate=" + c
	}
	return s
}

func TestStagedViews(t *testing.T) {
	t.Parallel()
	m := newMux(watchmux.Options{})
	for _, s := range staged() {
		s(m)
	}
	m.MarkSynced()
	views, _ := readViews(t, m, rolebindings)
	want := map[string]string{
		// The global namespace's own view shows both as they are.
		global + "/g":      "implicit-global/g local@implicit-global | g | uid-implicit-global-g/implicit-global | uid-implicit-global-g | %s |  | ",
		global + "/g.next": "implicit-global/g.next local@implicit-global | g.next | uid-implicit-global-g.next/implicit-global | uid-implicit-global-g.next | %s |  | ",
		// The canary sees the candidate under the stable name and uid.
		"team-a/g":   "team-a/g global@implicit-global | g | uid-implicit-global-g/team-a | uid-implicit-global-g | %s |  | g.next",
		"team-b/g":   "team-b/g global@implicit-global | g | uid-implicit-global-g/team-b | uid-implicit-global-g | %s |  | ",
		"team-a-1/g": "team-a-1/g global@implicit-global | g | uid-implicit-global-g/team-a-1 | uid-implicit-global-g | %s |  | ",
		"org/g":      "org/g global@implicit-global | g | uid-implicit-global-g/org | uid-implicit-global-g | %s |  | ",
		"solo/g":     "solo/g global@implicit-global | g | uid-implicit-global-g/solo | uid-implicit-global-g | %s |  | ",
	}
	var rvs = map[string]string{}
	_, err := m.Read(func(r watchmux.Reader) {
		for _, n := range []string{"g", "g.next"} {
			it, _ := r.Source(rolebindings, global, n)
			rvs[n] = it.Object.(metav1.Object).GetResourceVersion()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(views) != len(want) {
		t.Errorf("views hold %d items, want %d: %q", len(views), len(want), views)
	}
	for k, w := range want {
		src := rvs["g"]
		if k == global+"/g.next" || k == "team-a/g" {
			src = rvs["g.next"]
		}
		if w = fmt.Sprintf(w, src); views[k] != w {
			t.Errorf("%s:\n got %q\nwant %q", k, views[k], w)
		}
	}
}

// TestStagedEvents checks the events of every step of a rollout: a MODIFIED
// exactly where a namespace's version changes.
func TestStagedEvents(t *testing.T) {
	t.Parallel()
	stable := "uid=uid-implicit-global-g"
	cases := []struct {
		name   string
		setup  []step
		change []step
		want   []string
	}{{
		name:   "editing the candidate changes the canaries' items and the global namespace's own",
		setup:  staged(),
		change: []step{putRB(global, "g.next", candidateFor("g", v1alpha1.LabelStage+"=canary"))},
		want: []string{
			"MODIFIED implicit-global/g.next local@implicit-global uid=uid-implicit-global-g.next",
			"MODIFIED team-a/g global@implicit-global " + stable + " candidate=g.next",
		},
	}, {
		name:   "editing the stable source changes everyone else's (no batch: the name has a candidate)",
		setup:  staged(),
		change: []step{putRB(global, "g")},
		want: []string{
			"MODIFIED implicit-global/g local@implicit-global " + stable,
			"MODIFIED org/g global@implicit-global " + stable,
			"MODIFIED solo/g global@implicit-global " + stable,
			"MODIFIED team-a-1/g global@implicit-global " + stable,
			"MODIFIED team-b/g global@implicit-global " + stable,
		},
	}, {
		name:   "widening the selector",
		setup:  staged(),
		change: []step{putRB(global, "g.next", candidateFor("g", v1alpha1.LabelStage+" in (canary,prod)"))},
		want: []string{
			"MODIFIED implicit-global/g.next local@implicit-global uid=uid-implicit-global-g.next",
			"MODIFIED team-a/g global@implicit-global " + stable + " candidate=g.next",
			"MODIFIED team-b/g global@implicit-global " + stable + " candidate=g.next",
		},
	}, {
		name:   "aborting: deleting the candidate",
		setup:  staged(),
		change: []step{delRB(global, "g.next")},
		want: []string{
			"DELETED implicit-global/g.next local@implicit-global uid=uid-implicit-global-g.next",
			"MODIFIED team-a/g global@implicit-global " + stable,
		},
	}, {
		name:   "promoting: the candidate's content into the stable source, then deleting the candidate",
		setup:  staged(),
		change: []step{putRB(global, "g"), delRB(global, "g.next")},
		want: []string{
			"DELETED implicit-global/g.next local@implicit-global uid=uid-implicit-global-g.next",
			"MODIFIED implicit-global/g local@implicit-global " + stable,
			"MODIFIED org/g global@implicit-global " + stable,
			"MODIFIED solo/g global@implicit-global " + stable,
			"MODIFIED team-a-1/g global@implicit-global " + stable,
			"MODIFIED team-a/g global@implicit-global " + stable,
			"MODIFIED team-b/g global@implicit-global " + stable,
		},
	}, {
		name:   "a staged creation is added for the canaries only, with the candidate's uid",
		setup:  staged(),
		change: []step{putRB(global, "new.next", candidateFor("new", v1alpha1.LabelStage+"=canary"))},
		want: []string{
			"ADDED implicit-global/new.next local@implicit-global uid=uid-implicit-global-new.next",
			"ADDED team-a/new global@implicit-global uid=uid-implicit-global-new.next candidate=new.next",
		},
	}, {
		name:   "a staged creation promoted: the canary's item takes the source's uid",
		setup:  staged(putRB(global, "new.next", candidateFor("new", v1alpha1.LabelStage+"=canary"))),
		change: []step{putRB(global, "new")},
		want: []string{
			"ADDED implicit-global/new local@implicit-global uid=uid-implicit-global-new",
			"ADDED org/new global@implicit-global uid=uid-implicit-global-new",
			"ADDED solo/new global@implicit-global uid=uid-implicit-global-new",
			"ADDED team-a-1/new global@implicit-global uid=uid-implicit-global-new",
			"ADDED team-b/new global@implicit-global uid=uid-implicit-global-new",
			"MODIFIED team-a/new global@implicit-global uid=uid-implicit-global-new candidate=new.next",
		},
	}, {
		name:   "a candidate that turns into an ordinary source is a new item everywhere",
		setup:  staged(),
		change: []step{putRB(global, "g.next")},
		want: []string{
			"ADDED org/g.next global@implicit-global uid=uid-implicit-global-g.next",
			"ADDED solo/g.next global@implicit-global uid=uid-implicit-global-g.next",
			"ADDED team-a-1/g.next global@implicit-global uid=uid-implicit-global-g.next",
			"ADDED team-a/g.next global@implicit-global uid=uid-implicit-global-g.next",
			"ADDED team-b/g.next global@implicit-global uid=uid-implicit-global-g.next",
			"MODIFIED implicit-global/g.next local@implicit-global uid=uid-implicit-global-g.next",
			"MODIFIED team-a/g global@implicit-global " + stable,
		},
	}, {
		name:   "a candidate moved to another stable name",
		setup:  staged(putRB(global, "h")),
		change: []step{putRB(global, "g.next", candidateFor("h", v1alpha1.LabelStage+"=canary"))},
		want: []string{
			"MODIFIED implicit-global/g.next local@implicit-global uid=uid-implicit-global-g.next",
			"MODIFIED team-a/g global@implicit-global " + stable,
			"MODIFIED team-a/h global@implicit-global uid=uid-implicit-global-h candidate=g.next",
		},
	}, {
		name:   "a malformed candidate reaches no one, and never shows as a source",
		setup:  staged(),
		change: []step{putRB(global, "g.next", candidateFor("g", "team=a"))},
		want: []string{
			"MODIFIED implicit-global/g.next local@implicit-global uid=uid-implicit-global-g.next",
			"MODIFIED team-a/g global@implicit-global " + stable,
		},
	}, {
		name:   "a second candidate for the name: none applies",
		setup:  staged(),
		change: []step{putRB(global, "g.other", candidateFor("g", v1alpha1.LabelStage+"=prod"))},
		want: []string{
			"ADDED implicit-global/g.other local@implicit-global uid=uid-implicit-global-g.other",
			"MODIFIED team-a/g global@implicit-global " + stable,
		},
	}, {
		// The global edit of a name that a parent's candidate stages goes
		// through the batch path: the canary below the parent must be an
		// exception, on the parent's staged creation.
		name:   "a parent's candidate for a global name: the batch of a global edit leaves its canaries out",
		setup:  staged(putRB(global, "q"), putRB("org", "q.org", candidateFor("q", v1alpha1.LabelStage+"=canary"))),
		change: []step{putRB(global, "q")},
		want: []string{
			"MODIFIED implicit-global/q local@implicit-global uid=uid-implicit-global-q",
			"MODIFIED org/q global@implicit-global uid=uid-implicit-global-q",
			"MODIFIED solo/q global@implicit-global uid=uid-implicit-global-q",
			"MODIFIED team-a-1/q global@implicit-global uid=uid-implicit-global-q",
			"MODIFIED team-b/q global@implicit-global uid=uid-implicit-global-q",
		},
	}, {
		name:   "a parent's candidate for a global name, which a global lock then blocks",
		setup:  staged(putRB(global, "q"), putRB("org", "q.org", candidateFor("q", v1alpha1.LabelStage+"=canary"))),
		change: []step{putRB(global, "q", locked)},
		want: []string{
			"MODIFIED implicit-global/q local@implicit-global uid=uid-implicit-global-q",
			"MODIFIED org/q global@implicit-global uid=uid-implicit-global-q",
			"MODIFIED solo/q global@implicit-global uid=uid-implicit-global-q",
			"MODIFIED team-a-1/q global@implicit-global uid=uid-implicit-global-q",
			"MODIFIED team-a/q global@implicit-global conflict uid=uid-implicit-global-q",
			"MODIFIED team-b/q global@implicit-global uid=uid-implicit-global-q",
		},
	}, {
		name:   "a global candidate for a locked name stays locked: a parent's staged creation is blocked",
		setup:  staged(putRB(global, "g", locked), putRB("org", "g.org", candidateFor("g", v1alpha1.LabelStage+"=canary"))),
		change: []step{putRB(global, "g.next", candidateFor("g", v1alpha1.LabelStage+"=canary"))},
		want: []string{
			"MODIFIED implicit-global/g.next local@implicit-global uid=uid-implicit-global-g.next",
			"MODIFIED team-a/g global@implicit-global conflict " + stable + " candidate=g.next",
		},
	}, {
		name:   "a parent's candidate stages a creation in its subtree only",
		setup:  staged(),
		change: []step{putRB("org", "p.next", candidateFor("p", v1alpha1.LabelStage+"=canary"))},
		want: []string{
			"ADDED org/p.next local@org uid=uid-org-p.next",
			"ADDED team-a/p parent@org uid=uid-org-p.next candidate=p.next",
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := stagedEvents(t, tc.setup, tc.change...); !slices.Equal(got, tc.want) {
				t.Errorf("events:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestStageLabelEvents checks that a namespace's stage label change
// re-evaluates its views: a MODIFIED only for the names whose version it
// sees changes, in it alone (a selector matches the viewer's stage, not an
// ancestor's).
func TestStageLabelEvents(t *testing.T) {
	t.Parallel()
	stable := "uid=uid-implicit-global-g"
	setup := staged(
		putRB(global, "h"),
		putRB(global, "h.next", candidateFor("h", v1alpha1.LabelStage+" in (canary,early)")),
		putRB(global, "k"),
	)
	cases := []struct {
		name   string
		change step
		want   []string
	}{{
		name:   "prod to canary: both staged names switch",
		change: addNS(namespace("team-b", parent("org"), stage("canary"))),
		want: []string{
			"MODIFIED team-b/g global@implicit-global " + stable + " candidate=g.next",
			"MODIFIED team-b/h global@implicit-global uid=uid-implicit-global-h candidate=h.next",
		},
	}, {
		name:   "canary to early: only the name whose selector stops matching",
		change: addNS(namespace("team-a", parent("org"), stage("early"))),
		want:   []string{"MODIFIED team-a/g global@implicit-global " + stable},
	}, {
		name:   "canary to none: the parent's change reaches no child's version",
		change: addNS(namespace("team-a", parent("org"))),
		want: []string{
			"MODIFIED team-a/g global@implicit-global " + stable,
			"MODIFIED team-a/h global@implicit-global uid=uid-implicit-global-h",
		},
	}, {
		name:   "a stage that no selector matches: nothing",
		change: addNS(namespace("solo", stage("prod"))),
	}, {
		name:   "an unrelated label: nothing",
		change: addNS(namespace("team-a", parent("org"), stage("canary"), func(ns *corev1.Namespace) { ns.Labels["team"] = "a" })),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := stagedEvents(t, setup, tc.change); !slices.Equal(got, tc.want) {
				t.Errorf("events:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
