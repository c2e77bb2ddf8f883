package answers

import (
	"fmt"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// Exceptions returns the exceptions declared on namespace and on its
// ancestors (what it inherits: its lineage's), or, for "", every
// namespace's; each in the namespace that declares it, sorted by namespace
// then name. Their state is read from the annotations and the views, as
// of one version, never from a clock: Expired once marked, Requested while
// an item it names in the declaring namespace's view needs an approval
// this version lacks, Active otherwise.
func (a *Answers) Exceptions(namespace string) (out []v1alpha1.Exception, err error) {
	found := true
	err = a.read(func(r watchmux.Reader) {
		var declaring []string
		if namespace == "" {
			declaring = r.Namespaces()
		} else {
			l := r.Lineage(namespace)
			if found = l.Namespace != nil; !found {
				return
			}
			declaring = append(declaring, namespace)
			for _, anc := range l.Ancestors {
				declaring = append(declaring, anc.Name)
			}
		}
		for _, d := range declaring {
			ns, ok := r.Namespace(d)
			if !ok {
				continue
			}
			for _, e := range merge.ExceptionsOf(ns) {
				out = append(out, exception(r, d, e))
			}
		}
	})
	if err == nil && !found {
		err = namespaceNotFound(namespace)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out, err
}

// exception is e, declared on namespace d, with its state.
func exception(r watchmux.Reader, d string, e merge.Exception) v1alpha1.Exception {
	x := v1alpha1.Exception{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Exception"},
		ObjectMeta: metav1.ObjectMeta{Name: e.Name, Namespace: d},
		Spec:       *e.ExceptionSpec.DeepCopy(),
		Status:     v1alpha1.ExceptionStatus{Digest: e.Digest, State: v1alpha1.ExceptionActive},
	}
	if e.Approval != nil {
		x.Status.Approval = e.Approval.DeepCopy()
	}
	if e.Expired {
		x.Status.State = v1alpha1.ExceptionExpired
		return x
	}
	x.Status.NeedsApproval = needsApproval(r, d, e)
	if len(x.Status.NeedsApproval) > 0 {
		x.Status.State = v1alpha1.ExceptionRequested
	}
	return x
}

// needsApproval lists the items e names in d's views that stay there
// because their sources require an approval e's version lacks, as
// "<resource> <namespace>/<name>": the steps Explain shows as
// BlockedByExceptionRules for this exception.
func needsApproval(r watchmux.Reader, d string, e merge.Exception) []string {
	l := r.Lineage(d)
	var out []string
	for _, entry := range e.Exclude {
		exs, errs := merge.ParseExclusions(entry)
		if len(errs) > 0 || len(exs) != 1 || !r.Serves(exs[0].Resource) {
			continue
		}
		resource, names := exs[0].Resource, []string{exs[0].Name}
		if exs[0].Name == "*" {
			names = inheritedNames(r, resource, l)
		}
		for _, name := range names {
			for _, lv := range explain(r, resource, name, l, nil).Levels {
				if lv.Namespace != d {
					continue
				}
				for _, step := range lv.Exclusions {
					if step.Exclusion.Exception != e.Name || step.Effect != merge.ExclusionRuled || step.Item == nil || !step.Item.Exceptions.Approval {
						continue
					}
					if s := fmt.Sprintf("%s %s/%s", resource, merge.SourceKey(*step.Item), step.Item.Name); !slices.Contains(out, s) {
						out = append(out, s)
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// inheritedNames are the names of resource's sources that l's namespace
// may inherit: its ancestors' and the global namespace's.
func inheritedNames(r watchmux.Reader, resource string, l merge.Lineage) []string {
	scopes := []string{r.GlobalNamespace(resource)}
	for _, anc := range l.Ancestors {
		scopes = append(scopes, anc.Name)
	}
	var names []string
	for _, ns := range scopes {
		for _, it := range r.SourcesIn(resource, ns) {
			if !slices.Contains(names, it.Name) {
				names = append(names, it.Name)
			}
		}
	}
	return names
}

// ExceptionState is the state of exception e declared on namespace, as
// Exceptions says it (Expired, Requested or Active); Active when the views
// can't be read.
func (a *Answers) ExceptionState(namespace string, e merge.Exception) string {
	state := v1alpha1.ExceptionActive
	if e.Expired {
		return v1alpha1.ExceptionExpired
	}
	_ = a.read(func(r watchmux.Reader) {
		if len(needsApproval(r, namespace, e)) > 0 {
			state = v1alpha1.ExceptionRequested
		}
	})
	return state
}
