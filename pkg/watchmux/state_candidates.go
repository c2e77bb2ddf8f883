package watchmux

import (
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// The mirror's candidate indexes (staged rollout): which namespaces hold
// candidates for which stable names, and which view items are built from
// one. Callers hold Mux.mu, as for the rest of state.

// candidateKey is a stable name in a namespace.
type candidateKey struct{ namespace, name string }

// indexCandidate adds (or removes) the candidate name for the stable name
// forName in namespace to the candidate indexes.
func (s *state) indexCandidate(resource, namespace, name, forName string, add bool) {
	key := candidateKey{namespace, forName}
	byKey, byFor := s.candidates[resource], s.candidateHolders[resource]
	if add {
		if byKey[key] == nil {
			byKey[key] = sets.New[string]()
		}
		byKey[key].Insert(name)
		if byFor[forName] == nil {
			byFor[forName] = sets.New[string]()
		}
		byFor[forName].Insert(namespace)
		s.candidateCounts[resource]++
		return
	}
	byKey[key].Delete(name)
	if byKey[key].Len() == 0 {
		delete(byKey, key)
		byFor[forName].Delete(namespace)
		if byFor[forName].Len() == 0 {
			delete(byFor, forName)
		}
	}
	s.candidateCounts[resource]--
}

// hasCandidatesFor reports whether namespace holds a candidate for the
// stable name of resource.
func (s *state) hasCandidatesFor(resource, namespace, name string) bool {
	return s.candidates[resource][candidateKey{namespace, name}].Len() > 0
}

// anyCandidates reports whether any served resource has a candidate.
func (s *state) anyCandidates() bool {
	for _, n := range s.candidateCounts {
		if n > 0 {
			return true
		}
	}
	return false
}

// trackName records whether namespace's view item name of resource, as
// after holds it (the merge of that name alone), is built from a candidate.
func (s *state) trackName(resource, namespace, name string, after []merge.Result) {
	views := s.candidateViews[resource]
	if len(after) > 0 && after[0].Item.Name == name && after[0].Candidates() != "" {
		if views[namespace] == nil {
			views[namespace] = sets.New[string]()
		}
		views[namespace].Insert(name)
		return
	}
	if views[namespace] == nil {
		return
	}
	views[namespace].Delete(name)
	if views[namespace].Len() == 0 {
		delete(views, namespace)
	}
}

// trackView records which of namespace's view items of resource, as the
// whole view after holds them, are built from a candidate.
func (s *state) trackView(resource, namespace string, after []merge.Result) {
	views := s.candidateViews[resource]
	delete(views, namespace)
	for _, r := range after {
		if r.Candidates() != "" {
			if views[namespace] == nil {
				views[namespace] = sets.New[string]()
			}
			views[namespace].Insert(r.Item.Name)
		}
	}
}
