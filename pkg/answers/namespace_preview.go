package answers

import (
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// PreviewNamespace tells what the views of resource would show if the
// namespace ns.Name had ns's labels and annotations: its parent, tenancy,
// stage and exclusions decide what it and its subtree inherit. Each
// namespace of the subtree whose view would gain, lose or change an item is
// listed, one change per item (NamespaceChange.Name), merged with the same
// code the views use; st.Reached counts those namespaces but ns.Name.
func (a *Answers) PreviewNamespace(resource string, ns *corev1.Namespace) (v1alpha1.PreviewStatus, error) {
	next := merge.NamespaceOf(ns)
	st := v1alpha1.PreviewStatus{Name: ns.Name, Operation: v1alpha1.OperationUpdate}
	err := a.read(func(r watchmux.Reader) {
		if _, ok := r.Namespace(ns.Name); !ok {
			st.Operation = v1alpha1.OperationCreate
		}
		get := func(name string) (*merge.Namespace, bool) {
			if name == ns.Name {
				return next, true
			}
			return r.Namespace(name)
		}
		reached := map[string]bool{}
		for _, n := range subtree(r, ns.Name) {
			before := byName(r.Results(resource, n, ""))
			after := byName(viewIn(r, resource, merge.Resolve(r.Policy(), n, get)))
			names := make([]string, 0, len(before)+len(after))
			for name := range before {
				names = append(names, name)
			}
			for name := range after {
				if _, ok := before[name]; !ok {
					names = append(names, name)
				}
			}
			sort.Strings(names)
			for _, name := range names {
				b, had := before[name]
				f, has := after[name]
				change := v1alpha1.NamespaceChange{Namespace: n, Name: name}
				switch {
				case !had:
					change.Type, change.After = v1alpha1.ChangeAdded, itemSummary(&f)
				case !has:
					change.Type, change.Before = v1alpha1.ChangeDeleted, itemSummary(&b)
				case !sameItem(b, f):
					change.Type, change.Before, change.After = v1alpha1.ChangeModified, itemSummary(&b), itemSummary(&f)
				default:
					continue
				}
				st.Changed = append(st.Changed, change)
				if n != ns.Name {
					reached[n] = true
				}
			}
		}
		st.Reached = len(reached)
	})
	return st, err
}

// subtree is namespace and the namespaces below it by their parent labels,
// sorted; a cycle is walked once.
func subtree(r watchmux.Reader, namespace string) []string {
	seen := map[string]bool{namespace: true}
	out := []string{namespace}
	for i := 0; i < len(out); i++ {
		for _, c := range r.Children(out[i]) {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	sort.Strings(out)
	return out
}

// viewIn merges the whole view of resource of the lineage l's namespace,
// as the mirror merges it with its own lineage.
func viewIn(r watchmux.Reader, resource string, l merge.Lineage) []merge.Result {
	return merge.View(r, resource, l, func(ns string) []merge.Item {
		return r.SourcesIn(resource, ns)
	})
}

func byName(rs []merge.Result) map[string]merge.Result {
	out := make(map[string]merge.Result, len(rs))
	for _, r := range rs {
		out[r.Item.Name] = r
	}
	return out
}
