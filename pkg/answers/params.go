package answers

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// NamespaceLabels returns namespace's labels, and false if it does not
// exist: what an admission policy's namespaceSelector is matched against.
func (a *Answers) NamespaceLabels(namespace string) (ls map[string]string, exists bool, err error) {
	err = a.read(func(r watchmux.Reader) {
		var ns *merge.Namespace
		if ns, exists = r.Namespace(namespace); exists {
			ls = ns.Labels
		}
	})
	return ls, exists, err
}

// Params returns the items of namespace's view of resource that an
// admission policy binding's paramRef resolves to there, as kube-apiserver
// reads them through the view: item name when set, else every item whose
// labels sel matches, sorted by name. Each says where it comes from.
func (a *Answers) Params(resource, namespace, name string, sel labels.Selector) (out []v1alpha1.PolicyParam, err error) {
	err = a.read(func(r watchmux.Reader) {
		for _, res := range r.Results(resource, namespace, name) {
			if name == "" && !selects(sel, res) {
				continue
			}
			p := v1alpha1.PolicyParam{Name: res.Item.Name, Scope: string(res.Scope), Namespace: res.Item.Namespace, Candidate: res.Candidates()}
			for _, o := range res.Overlays {
				p.Overlays = append(p.Overlays, o.Namespace+"/"+o.Name)
			}
			out = append(out, p)
		}
	})
	return out, err
}

// selects reports whether sel matches the labels of the view item res.
func selects(sel labels.Selector, res merge.Result) bool {
	if sel == nil {
		return false
	}
	obj := res.Object
	if obj == nil {
		obj = res.Item.Object
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	return sel.Matches(labels.Set(m.GetLabels()))
}
