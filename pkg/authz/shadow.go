package authz

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// Shadow decisions (issue 30, "audit before enforce"): a namespace outside
// a candidate RoleBinding's canaries sees the stable binding, and the
// webhook answers from it. For every request it answers there, it also
// decides the request a second time over the view the namespace would have
// if its stage were selected, and records where the two answers differ
// (audit.go); the answer given is the first one, always.
//
// The second decision is made inside the same Mux.Read as the first, from
// the same mirror and ClusterRole cache: no request to kube-apiserver. Only
// the item of the stable name is merged again (merge.Levels with that one
// candidate's selector matching every stage); the other items are the
// view's. The shadows are cached with the decision, under the same key: the
// lineage generation changes with any candidate of the lineage (a candidate
// is an item of its own namespace's view), and the real Roles a shadow
// resolved are kept with the first decision's. A request in a namespace
// with no candidate above it costs one scan of the lineage's candidates on
// a cache miss, and nothing more on a hit.
//
// Only RoleBinding candidates are audited: a candidate Role is not applied
// (a binding's Role is resolved in the binding's own namespace, where
// candidates are not staged), so it would change no answer.

// CandidateRef names a candidate RoleBinding: its namespace, name and uid,
// and the hub cluster it was read from ("" for the local one).
type CandidateRef struct {
	Namespace, Name string
	UID             types.UID
	Cluster         string
}

// auditTarget is a candidate a namespace does not see, but would if its
// stage were selected: stable is the name it stands in for.
type auditTarget struct {
	candidate CandidateRef
	stable    string
}

// shadowDecision is the answer a request would get with target applied.
type shadowDecision struct {
	target auditTarget
	d      Decision
}

// bindingView is what a decision reads of a namespace's RoleBindings: the
// merged items, sorted by name, and each item as it would be without the
// namespace's own object of that name (the check of local overlays).
type bindingView struct {
	results   []merge.Result
	inherited func(name string) (merge.Result, bool)
}

// actualView is namespace's view, as the views serve it.
func actualView(r watchmux.Reader, namespace string) bindingView {
	return bindingView{
		results: r.Results(resourceRoleBindings, namespace, ""),
		inherited: func(name string) (merge.Result, bool) {
			return r.Inherited(resourceRoleBindings, namespace, name)
		},
	}
}

// decideAudited decides attrs, and again with each candidate the namespace
// could see applied: the shadows. The real Roles of both are kept.
func (a *Authorizer) decideAudited(r watchmux.Reader, attrs Attributes) cached {
	v := actualView(r, attrs.Namespace)
	c := a.decideIn(r, attrs, v)
	for _, t := range auditTargets(r, attrs.Namespace) {
		sv, ok := shadowView(r, attrs.Namespace, v, t)
		if !ok {
			continue
		}
		s := a.decideIn(r, attrs, sv)
		for _, rv := range s.roles {
			if !slices.Contains(c.roles, rv) {
				c.roles = append(c.roles, rv)
			}
		}
		c.shadows = append(c.shadows, shadowDecision{target: t, d: s.d})
	}
	return c
}

// decideBindAudited is decideAudited for a bind request (never cached).
func (a *Authorizer) decideBindAudited(r watchmux.Reader, attrs Attributes) cached {
	v := actualView(r, attrs.Namespace)
	c := cached{d: a.decideBindIn(r, attrs, v)}
	for _, t := range auditTargets(r, attrs.Namespace) {
		if sv, ok := shadowView(r, attrs.Namespace, v, t); ok {
			c.shadows = append(c.shadows, shadowDecision{target: t, d: a.decideBindIn(r, attrs, sv)})
		}
	}
	return c
}

// auditTargets returns the well-formed candidate RoleBindings of
// namespace's global namespace and ancestors whose selector does not match
// namespace's stage, each the only candidate for its stable name in its
// namespace (with two, none applies anywhere). The namespace's own
// candidates are real bindings there, enforced by RBAC: never a target.
func auditTargets(r watchmux.Reader, namespace string) []auditTarget {
	l := r.Lineage(namespace)
	if l.Namespace == nil || !l.Tenant {
		return nil
	}
	stage := labels.Set{}
	if v, ok := l.Namespace.Labels[v1alpha1.LabelStage]; ok {
		stage[v1alpha1.LabelStage] = v
	}
	var out []auditTarget
	scan := func(ns string) {
		cands := r.Candidates(resourceRoleBindings, ns)
		for _, it := range cands {
			c := it.Candidate
			if c == nil || c.OutOfCluster || c.Selector == nil || c.Selector.Matches(stage) || !wellFormed(it) || !onlyOneFor(cands, c.For) {
				continue
			}
			out = append(out, auditTarget{
				candidate: CandidateRef{Namespace: ns, Name: it.Name, UID: it.UID, Cluster: it.Cluster},
				stable:    c.For,
			})
		}
	}
	scan(r.GlobalNamespace(resourceRoleBindings))
	for _, anc := range l.Ancestors {
		scan(anc.Name)
	}
	return out
}

// wellFormed reports whether a candidate's annotations parse: a malformed
// one reaches no namespace, so it is not audited either.
func wellFormed(it merge.Item) bool {
	o, ok := it.Object.(metav1.Object)
	if !ok {
		return false
	}
	_, err := merge.ParseCandidate(it.Name, o.GetAnnotations())
	return err == nil
}

func onlyOneFor(cands []merge.Item, stable string) bool {
	n := 0
	for _, it := range cands {
		if it.Candidate != nil && it.Candidate.For == stable {
			n++
		}
	}
	return n == 1
}

// shadowView is v with the item t.stable as namespace would see it with t
// applied; false when t would not show in that item (the namespace's own
// object of that name shadows it, an exclusion or a lock keeps it out).
func shadowView(r watchmux.Reader, namespace string, v bindingView, t auditTarget) (bindingView, bool) {
	staged := stagedItem(r, namespace, t, false)
	if len(staged) != 1 || !showsCandidate(staged[0], t.candidate) {
		return bindingView{}, false
	}
	results := make([]merge.Result, 0, len(v.results)+1)
	placed := false
	for _, res := range v.results {
		switch {
		case res.Item.Name == t.stable:
			continue
		case !placed && res.Item.Name > t.stable:
			results = append(results, staged[0])
			placed = true
		}
		results = append(results, res)
	}
	if !placed {
		results = append(results, staged[0])
	}
	return bindingView{
		results: results,
		inherited: func(name string) (merge.Result, bool) {
			if name != t.stable {
				return v.inherited(name)
			}
			res := stagedItem(r, namespace, t, true)
			if len(res) == 0 {
				return merge.Result{}, false
			}
			return res[0], true
		},
	}, true
}

// stagedItem merges item t.stable of namespace's view with t's selector
// matching every stage (the namespace's own object of that name left out
// when withoutLocal): what the namespace would see if t selected it. Every
// other candidate keeps its own selector.
func stagedItem(r watchmux.Reader, namespace string, t auditTarget, withoutLocal bool) []merge.Result {
	out := merge.View(r, resourceRoleBindings, r.Lineage(namespace), func(ns string) []merge.Item {
		if withoutLocal && ns == namespace {
			return nil
		}
		items := r.NameItems(resourceRoleBindings, ns, t.stable)
		if ns != t.candidate.Namespace {
			return items
		}
		out := slices.Clone(items)
		for i := range out {
			if out[i].Candidate != nil && out[i].Name == t.candidate.Name {
				c := *out[i].Candidate
				c.Selector = labels.Everything()
				out[i].Candidate = &c
			}
		}
		return out
	})
	return slices.DeleteFunc(out, func(res merge.Result) bool { return res.Item.Name != t.stable })
}

// showsCandidate reports whether c is in res: its base or an overlay.
func showsCandidate(res merge.Result, c CandidateRef) bool {
	if res.Item.FromCandidate == c.Name && res.Item.Namespace == c.Namespace {
		return true
	}
	for _, o := range res.Overlays {
		if o.FromCandidate == c.Name && o.Namespace == c.Namespace {
			return true
		}
	}
	return false
}
