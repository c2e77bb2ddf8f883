package watchmux

import "github.com/implicit-dev/implicit-apiserver/pkg/merge"

// Reach is the one definition of an edit's reach, which the fan-out
// warning, previews (status.reached), kubectl implicit reach, diff and
// rollout status all count: the namespaces, sorted as Reached sorts them,
// other than the source's own, whose view item shows the source before or
// after the edit: as the item's source (for a candidate: as the candidate
// standing in for the item it stages; a canary of a stable source sees
// the source's candidate) or merged onto it as an overlay. A namespace that
// shadows or excludes the source, or whose own item a lock keeps, is not
// reached; the source's own namespace never is. The reach of a source as it
// stands is the reach of any edit that keeps it there: the namespaces that
// inherit it and see it.
func Reach(r Reader, resource string, e Edit) []string {
	view := e.Name
	if e.View != "" {
		view = e.View
	}
	candidate := view != e.Name
	shows := func(rs []merge.Result) bool {
		if len(rs) == 0 {
			return false
		}
		for _, it := range append([]merge.Item{rs[0].Item}, rs[0].Overlays...) {
			if it.Namespace != e.Namespace {
				continue
			}
			if candidate && it.FromCandidate == e.Name || !candidate && it.Name == e.Name {
				return true
			}
		}
		return false
	}
	var out []string
	for _, ns := range r.Reached(resource, e.Namespace) {
		if ns == e.Namespace {
			continue
		}
		if shows(r.Results(resource, ns, view)) || shows(r.ResultsAfter(resource, ns, e)) {
			out = append(out, ns)
		}
	}
	return out
}
