package whatif

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// CandidateSource is a candidate among a namespace's sources.
type CandidateSource struct {
	// Name is the candidate's own name; For the stable name it stages ("" when
	// its implicit.dev/candidate-for is missing).
	Name, For string
	// Locked: the candidate itself carries implicit.dev/locked (writing it
	// so needed unlock).
	Locked bool
}

// Candidates answers the guards: the candidates among namespace's sources of
// resource, sorted by name, from the mirror's candidate index.
func (x *Index) Candidates(resource, namespace string) (out []CandidateSource, err error) {
	err = x.read(func(r watchmux.Reader) {
		if !isServed(r, resource) {
			return
		}
		for _, it := range r.Candidates(resource, namespace) {
			out = append(out, CandidateSource{Name: it.Name, For: it.Candidate.For, Locked: it.Locked})
		}
	})
	return out, err
}

// SourceObject answers the guards: the object of the source namespace/name.
func (x *Index) SourceObject(resource, namespace, name string) (obj any, found bool, err error) {
	err = x.read(func(r watchmux.Reader) {
		var it merge.Item
		if it, found = r.Source(resource, namespace, name); found {
			obj = it.Object
		}
	})
	return obj, found, err
}

// CandidateReach answers the guards. The candidate obj stands in for its
// stable name c.For on namespace's level as merge.StageLevels would put it
// (locked when either is, the stable source's uid); of counts the other
// namespaces whose view of that name would then come from namespace (the
// winner or an overlay: shadows, exclusions and locks applied), the
// namespaces Reach would look at; reached those of them whose
// implicit.dev/stage c.Selector matches. The candidate's own namespace is
// not counted: there it shows under its own name, as a real object.
func (x *Index) CandidateReach(resource, namespace string, obj *unstructured.Unstructured, c *merge.Candidate) (reached, of int, err error) {
	ann := obj.GetAnnotations()
	stand := merge.Item{
		Namespace: namespace, Name: c.For, Object: obj, UID: obj.GetUID(), FromCandidate: obj.GetName(),
		Locked: merge.IsLocked(ann), Exceptions: merge.ExceptionRulesOf(ann), Overlay: merge.WantsOverlay(ann),
	}
	err = x.read(func(r watchmux.Reader) {
		if !isServed(r, resource) {
			return
		}
		c := c.InCluster(r.Membership()) // out of this cluster: reaches no one here
		if stable, ok := r.Source(resource, namespace, c.For); ok {
			stand.UID = stable.UID
			if stable.Locked {
				stand.Locked, stand.Overlay = true, stand.Overlay && stable.Overlay
			}
		}
		for _, viewer := range r.Reached(resource, namespace) {
			if viewer == namespace || !inheritsFrom(r, resource, viewer, namespace, stand) {
				continue
			}
			of++
			ns, ok := r.Namespace(viewer)
			if ok && c.Selector != nil && c.Selector.Matches(stageSet(ns)) {
				reached++
			}
		}
	})
	return reached, of, err
}

// stageSet is the label set canary selectors match for ns: its
// implicit.dev/stage only, absent when it has none.
func stageSet(ns *merge.Namespace) labels.Set {
	set := labels.Set{}
	if v, ok := ns.Labels[v1alpha1.LabelStage]; ok {
		set[v1alpha1.LabelStage] = v
	}
	return set
}

// inheritsFrom reports whether viewer's view of item.Name would come from
// namespace (its winner or an overlay) if namespace's source of that name
// were item.
func inheritsFrom(r watchmux.Reader, resource, viewer, namespace string, item merge.Item) bool {
	return inheritsThrough(r, resource, r.Lineage(viewer), namespace, item)
}

// inheritsThrough is inheritsFrom for the viewer of lineage l.
func inheritsThrough(r watchmux.Reader, resource string, l merge.Lineage, namespace string, item merge.Item) bool {
	view := merge.View(r, resource, l, func(ns string) []merge.Item {
		if ns == namespace {
			return []merge.Item{item}
		}
		if it, ok := r.Source(resource, ns, item.Name); ok {
			return []merge.Item{it}
		}
		return nil
	})
	for _, res := range view {
		if res.Item.Name != item.Name {
			continue
		}
		if res.Item.Namespace == namespace {
			return true
		}
		for _, o := range res.Overlays {
			if o.Namespace == namespace {
				return true
			}
		}
	}
	return false
}
