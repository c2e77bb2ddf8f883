package merge

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
)

// Candidate is what a candidate source declares: a staged version of the
// source named For in the candidate's own namespace, seen instead of it by
// the namespaces whose implicit.dev/stage label Selector matches. When the
// namespace holds no source named For, the candidate stages its creation.
type Candidate struct {
	// For is the stable source's name (implicit.dev/candidate-for).
	For string
	// Selector is implicit.dev/canary-selector, over LabelStage only. It is
	// labels.Nothing() when the candidate is malformed.
	Selector labels.Selector
	// Clusters is implicit.dev/canary-clusters, over the labels a fleet's
	// hub registered for its member clusters; nil when absent (every
	// cluster). See InCluster.
	Clusters labels.Selector
	// OutOfCluster is set, by whoever knows the cluster's registration
	// (InCluster), on a candidate whose Clusters does not select this
	// cluster: there it does not exist. Its Selector is then
	// labels.Nothing(): it reaches no namespace, and is not audited.
	OutOfCluster bool
	// Stages is the canary selector as parsed, which Selector is while the
	// candidate is in the cluster.
	Stages labels.Selector
}

// InAnyCluster is c before InCluster marked it out of a cluster: the
// candidate as its annotations declare it. c is never modified.
func (c *Candidate) InAnyCluster() *Candidate {
	if c == nil || !c.OutOfCluster {
		return c
	}
	out := *c
	out.Selector, out.OutOfCluster = out.Stages, false
	return &out
}

// InCluster returns c as it is in a cluster registered with labels
// (registered false: a cluster that is no member of a fleet, or one its
// hub has not registered): c itself when it is in the cluster, else a copy
// marked OutOfCluster, whose Selector matches nothing. c is never modified.
func (c *Candidate) InCluster(registered bool, clusterLabels labels.Set) *Candidate {
	if c == nil || c.Clusters == nil || registered && c.Clusters.Matches(clusterLabels) {
		return c
	}
	out := *c
	out.Selector, out.OutOfCluster = labels.Nothing(), true
	return &out
}

// IsCandidate reports whether annotations make their object a candidate,
// well formed or not: it carries any of the candidate annotations.
func IsCandidate(annotations map[string]string) bool {
	for _, k := range []string{v1alpha1.AnnotationCandidateFor, v1alpha1.AnnotationCanarySelector, v1alpha1.AnnotationCanaryClusters} {
		if _, ok := annotations[k]; ok {
			return true
		}
	}
	return false
}

// ParseCandidate reads the candidate annotations of the source object name.
// It returns nil and no error for an ordinary source, one that carries
// neither annotation.
//
// An object that carries either one is a candidate, even a malformed one:
// the error says what is wrong (the admission guard refuses it with that
// message), and the candidate returned matches no namespace. A malformed
// candidate that got past the guard (created before it ran) is then hidden
// from every inherited view and reaches no one: it is never shown as an
// ordinary source, which would hand its content to every namespace below.
func ParseCandidate(name string, annotations map[string]string) (*Candidate, error) {
	forName, hasFor := annotations[v1alpha1.AnnotationCandidateFor]
	sel, hasSel := annotations[v1alpha1.AnnotationCanarySelector]
	clusters, hasClusters := annotations[v1alpha1.AnnotationCanaryClusters]
	if !hasFor && !hasSel && !hasClusters {
		return nil, nil
	}
	c := &Candidate{For: forName, Selector: labels.Nothing(), Stages: labels.Nothing()}
	var errs []error
	switch {
	case strings.TrimSpace(forName) == "":
		errs = append(errs, fmt.Errorf("annotation %s must name the source this candidate stages, in the candidate's own namespace", v1alpha1.AnnotationCandidateFor))
	case strings.Contains(forName, "/"):
		errs = append(errs, fmt.Errorf("annotation %s: %q is not a name: a candidate stages a source of its own namespace only", v1alpha1.AnnotationCandidateFor, forName))
	case forName == name:
		errs = append(errs, fmt.Errorf("annotation %s: %q is the candidate's own name: name the stable source it stages, and give the candidate another name, e.g. %s.next", v1alpha1.AnnotationCandidateFor, forName, forName))
	default:
		if msgs := path.IsValidPathSegmentName(forName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("annotation %s: %q is not a valid name: %s", v1alpha1.AnnotationCandidateFor, forName, strings.Join(msgs, ", ")))
		}
	}
	parsed, err := parseCanarySelector(sel, hasSel)
	if err != nil {
		errs = append(errs, err)
	}
	var inClusters labels.Selector
	if hasClusters {
		if inClusters, err = parseCanaryClusters(clusters); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		// A malformed candidate reaches no namespace in any cluster.
		c.Clusters = labels.Nothing()
		return c, errors.Join(errs...)
	}
	c.Selector, c.Stages, c.Clusters = parsed, parsed, inClusters
	return c, nil
}

// parseCanaryClusters parses implicit.dev/canary-clusters: a label selector
// over the member clusters' registered labels, with at least one
// requirement (to be a candidate in every member, leave the annotation
// out).
func parseCanaryClusters(value string) (labels.Selector, error) {
	example := "e.g. implicit.dev/cluster-stage=canary"
	s, err := labels.Parse(value)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %q is not a label selector: %w", v1alpha1.AnnotationCanaryClusters, value, err)
	}
	if reqs, _ := s.Requirements(); len(reqs) == 0 {
		return nil, fmt.Errorf("annotation %s is empty, which would select every member cluster: name the clusters' labels, %s (to be a candidate in every member, remove the annotation)", v1alpha1.AnnotationCanaryClusters, example)
	}
	return s, nil
}

// parseCanarySelector parses implicit.dev/canary-selector. Every requirement
// must be on LabelStage, and there must be at least one: an empty selector
// would select every namespace at once, which is what a promotion does, not
// a stage. Negative requirements (!implicit.dev/stage, notin) are allowed;
// they also select namespaces without the label.
func parseCanarySelector(value string, present bool) (labels.Selector, error) {
	example := fmt.Sprintf("e.g. %s=canary or %s in (canary,early)", v1alpha1.LabelStage, v1alpha1.LabelStage)
	if !present {
		return nil, fmt.Errorf("annotation %s is missing: a candidate needs a selector over the namespace label %s, %s", v1alpha1.AnnotationCanarySelector, v1alpha1.LabelStage, example)
	}
	s, err := labels.Parse(value)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %q is not a label selector: %w", v1alpha1.AnnotationCanarySelector, value, err)
	}
	reqs, _ := s.Requirements()
	if len(reqs) == 0 {
		return nil, fmt.Errorf("annotation %s is empty, which would select every namespace: name the stages that see the candidate, %s (to reach every namespace, promote it)", v1alpha1.AnnotationCanarySelector, example)
	}
	var others []string
	for _, r := range reqs {
		if r.Key() != v1alpha1.LabelStage {
			others = append(others, fmt.Sprintf("%q", r.Key()))
		}
	}
	if len(others) > 0 {
		return nil, fmt.Errorf("annotation %s: %q selects on %s: a canary selector may only use the namespace label %s, %s",
			v1alpha1.AnnotationCanarySelector, value, strings.Join(others, ", "), v1alpha1.LabelStage, example)
	}
	return s, nil
}

// StageLevels applies the candidates among the levels' items for the
// viewing namespace viewer (nil: a namespace without a stage). It returns
// levels itself when no inherited level has a candidate, else staged
// copies: the levels and their items are never modified.
//
// It is a step of its own between Levels (which calls it) and MergeWith,
// rather than an Options field of MergeWith: Options are per resource while
// stages are per viewer, and staged levels are still plain levels, so
// MergeWith and Explain treat a candidate's item with the very code that
// treats any source.
//
// On every level but the local one (the viewer's own namespace), for each
// stable name:
//   - a candidate is removed under its own name;
//   - when the level's namespace has exactly one candidate for that name,
//     the name is not itself a candidate's, and the candidate's selector
//     matches viewer's implicit.dev/stage, the candidate's item takes the
//     stable source's place (or, with no stable source, is added: a staged
//     creation), renamed to the stable name. It keeps the stable source's
//     UID (a staged creation: the candidate's), records the candidate in
//     FromCandidate, and is locked when either is: a candidate can never
//     unlock, nor open a locked source to overlays (Overlay stays only if
//     both ask for it). It lies on the stable source's level, so MergeWith
//     applies shadows, exclusions, overlays and precedence to it exactly
//     as to the source it stands in for;
//   - with two candidates or more for one name, none applies: the guard
//     refuses a second, and this keeps a view that slipped past it
//     deterministic, and on the version nobody staged twice.
//
// A candidate stages the source of its name in its own namespace only: one
// whose stable name lives in another namespace (a parent's, the global
// one's) stages a creation in its own, which then shadows or overlays the
// inherited source as that created source would.
//
// The local level is left as it is: there the candidate is a real object,
// enforced natively beside the stable source (RBAC, a CNI), so the
// namespace's own view shows both, each under its own name, and what it
// sees is what is enforced.
func StageLevels(levels []Level, viewer *Namespace) []Level {
	var out []Level
	var stage labels.Set
	for i, lv := range levels {
		if lv.Scope == ScopeLocal || !hasCandidate(lv.Items) {
			continue
		}
		if out == nil {
			out = append([]Level(nil), levels...)
			stage = stageOf(viewer)
		}
		out[i].Items = stageItems(lv.Items, stage)
	}
	if out == nil {
		return levels
	}
	return out
}

// stageOf is the label set canary selectors match for viewer.
func stageOf(viewer *Namespace) labels.Set {
	stage := labels.Set{}
	if viewer != nil {
		if v, ok := viewer.Labels[v1alpha1.LabelStage]; ok {
			stage[v1alpha1.LabelStage] = v
		}
	}
	return stage
}

// hidden reports whether it is a candidate on a level where it can't show
// under its own name: any but the local one.
func hidden(lv Level, it Item) bool {
	return it.Candidate != nil && lv.Scope != ScopeLocal
}

func hasCandidate(items []Item) bool {
	for _, it := range items {
		if it.Candidate != nil {
			return true
		}
	}
	return false
}

// stageItems stages one inherited level's items for a viewer of stage.
func stageItems(items []Item, stage labels.Set) []Item {
	count := map[string]int{}
	candidateNames := map[string]bool{}
	for _, it := range items {
		if it.Candidate != nil {
			candidateNames[it.Name] = true
			if it.Candidate.For != "" {
				count[it.Candidate.For]++
			}
		}
	}
	// applies holds the one candidate that stands in for each stable name.
	applies := map[string]Item{}
	for _, it := range items {
		c := it.Candidate
		if c == nil || c.OutOfCluster || count[c.For] != 1 || candidateNames[c.For] || c.Selector == nil || !c.Selector.Matches(stage) {
			continue
		}
		applies[c.For] = it
	}
	out := make([]Item, 0, len(items))
	replaced := map[string]bool{}
	for _, it := range items {
		if it.Candidate != nil {
			continue
		}
		if c, ok := applies[it.Name]; ok && !replaced[it.Name] {
			// Two items of one name in one namespace can't both be
			// sources; MergeWith keeps the first, so that is the stable one.
			replaced[it.Name] = true
			stable := it
			out = append(out, standIn(c, &stable))
			continue
		}
		out = append(out, it)
	}
	for _, it := range items {
		if it.Candidate == nil {
			continue
		}
		if c, ok := applies[it.Candidate.For]; ok && c.Name == it.Name && !replaced[it.Candidate.For] {
			out = append(out, standIn(c, nil)) // a staged creation
		}
	}
	return out
}

// standIn is the item candidate c shows as, in the place of stable (nil for
// a staged creation).
func standIn(c Item, stable *Item) Item {
	s := c
	s.Name, s.Candidate, s.FromCandidate = c.Candidate.For, nil, c.Name
	if stable != nil {
		s.UID = stable.UID
		if stable.Locked {
			s.Locked = true
			s.Overlay = c.Overlay && stable.Overlay
		}
	}
	return s
}
