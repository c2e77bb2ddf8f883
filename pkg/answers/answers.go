package answers

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// Views is what the answers read: *watchmux.Mux.
type Views interface {
	// Read calls f with the mirror as of one resourceVersion; it fails
	// before the sources are read.
	Read(f func(watchmux.Reader)) (string, error)
	// EmptyObject returns an empty source object of resource.
	EmptyObject(resource string) runtime.Object
}

// Answers answers the question resources from the views: it implements
// registry.Hierarchies, registry.Explainer and registry.Previewer.
type Answers struct {
	views Views
}

// New returns the answers read from views.
func New(views Views) *Answers { return &Answers{views: views} }

// read calls f inside one Read, and answers 503 before the sources are read.
func (a *Answers) read(f func(r watchmux.Reader)) error {
	_, err := a.views.Read(f)
	if watchmux.IsNotSynced(err) {
		return notSynced()
	}
	return err
}

// notSynced is the API error of a question asked before the sources are read.
func notSynced() error {
	return apierrors.NewServiceUnavailable("implicit-apiserver is starting and has not read its sources yet")
}

// The answers of implicit.dev's hierarchies, explanations and previews
// (pkg/registry): where a namespace stands, why a name is or is not in a
// view, and what an edit of a source would change. Each reads the mirror
// inside one Read, changes nothing, and merges with the same code the views
// use. Before the sources are read each answers 503 ServiceUnavailable.

// Hierarchy returns where namespace stands in the hierarchy, and false if it
// does not exist. Its children are the namespaces that name it as parent and
// inherit from it: only those its sources reach.
func (a *Answers) Hierarchy(namespace string) (h v1alpha1.HierarchyStatus, exists bool, err error) {
	err = a.read(func(r watchmux.Reader) {
		if _, exists = r.Namespace(namespace); exists {
			h = hierarchy(r, namespace)
		}
	})
	return h, exists, err
}

// Hierarchies returns every namespace's hierarchy, by namespace.
func (a *Answers) Hierarchies() (out map[string]v1alpha1.HierarchyStatus, err error) {
	err = a.read(func(r watchmux.Reader) {
		names := r.Namespaces()
		out = make(map[string]v1alpha1.HierarchyStatus, len(names))
		for _, name := range names {
			out[name] = hierarchy(r, name)
		}
	})
	return out, err
}

func hierarchy(r watchmux.Reader, namespace string) v1alpha1.HierarchyStatus {
	l := r.Lineage(namespace)
	h := v1alpha1.HierarchyStatus{Tenant: l.Tenant}
	if l.Namespace != nil {
		h.Parent = l.Namespace.Labels[v1alpha1.LabelParent]
		h.NotTenant = notTenant(r, l)
	}
	for _, a := range l.Ancestors {
		h.Ancestors = append(h.Ancestors, a.Name)
	}
	if p := l.Problem; p != nil {
		h.Problems = []v1alpha1.HierarchyProblem{{
			Reason: string(p.Reason), Namespace: p.Namespace, Parent: p.Parent,
			Cycle: slices.Clone(p.Cycle), Message: p.String(),
		}}
	}
	for _, child := range r.Children(namespace) {
		if cl := r.Lineage(child); len(cl.Ancestors) > 0 && cl.Ancestors[0].Name == namespace {
			h.Children = append(h.Children, child)
		}
	}
	sort.Strings(h.Children)
	return h
}

// Serves reports whether resource is a view served now. Before the sources
// are read it reports true: the explanation then answers 503, as it would
// for a served resource.
func (a *Answers) Serves(resource string) bool {
	serves := false
	if err := a.read(func(r watchmux.Reader) { serves = r.Serves(resource) }); err != nil {
		return true
	}
	return serves
}

// SourceExists reports whether the source namespace/name of resource exists.
func (a *Answers) SourceExists(resource, namespace, name string) (exists bool, err error) {
	err = a.read(func(r watchmux.Reader) { _, exists = r.Source(resource, namespace, name) })
	return exists, err
}

// Explain tells why namespace's view of resource holds, or does not hold,
// the item name: every scope from global down to namespace, what it held and
// what became of it. It names only the namespace's lineage, which its views
// reveal already.
func (a *Answers) Explain(resource, namespace, name string) (st v1alpha1.ExplanationStatus, err error) {
	found := true
	err = a.read(func(r watchmux.Reader) {
		l := r.Lineage(namespace)
		if found = l.Namespace != nil; !found {
			return
		}
		e := explain(r, resource, name, l, nil)
		st = explanationStatus(resource, name, namespace, l, e)
		if s, ok := candidateSummary(r, resource, name, namespace, l); ok && !st.InView {
			st.Summary = s
		}
	})
	if err == nil && !found {
		// As kube-apiserver answers for an object of a namespace that
		// does not exist: the question has no answer.
		err = namespaceNotFound(namespace)
	}
	return st, err
}

// explain explains name in the view of lineage l, as if the edit were
// applied when it is set.
func explain(r watchmux.Reader, resource, name string, l merge.Lineage, edit *watchmux.Edit) merge.Explanation {
	levels := merge.Levels(l, r.GlobalNamespace(resource), func(ns string) []merge.Item {
		// The name's source and its candidates: a namespace whose stage a
		// candidate selects is explained with the candidate standing in.
		items := r.NameItems(resource, ns, name)
		if edit != nil && edit.Namespace == ns {
			// The edited source (a candidate for name is one of name's items).
			items = slices.DeleteFunc(items, func(it merge.Item) bool { return it.Name == edit.Name })
			if edit.Item != nil {
				items = append([]merge.Item{*edit.Item}, items...)
			}
		}
		return items
	})
	return merge.Explain(resource, name, levels, r.Options(resource))
}

func explanationStatus(resource, name, namespace string, l merge.Lineage, e merge.Explanation) v1alpha1.ExplanationStatus {
	st := v1alpha1.ExplanationStatus{Tenant: l.Tenant}
	if l.Problem != nil {
		st.HierarchyProblem = l.Problem.String()
	}
	scopeOf := map[string]string{}
	for _, lv := range e.Levels {
		scopeOf[lv.Namespace] = string(lv.Scope)
		se := v1alpha1.ScopeExplanation{Scope: string(lv.Scope), Namespace: lv.Namespace, Outcome: string(lv.Outcome), By: lv.By, Message: lv.Message()}
		if lv.Item != nil {
			se.Item = &v1alpha1.ItemReference{Namespace: lv.Item.Namespace, Name: lv.Item.Name, Scope: string(lv.Scope), Locked: lv.Item.Locked}
		}
		for _, ex := range lv.Exclusions {
			eff := v1alpha1.ExclusionEffect{Exclusion: ex.Exclusion.String(), Effect: string(ex.Effect), Exception: ex.Exclusion.Exception, Blocked: ex.Blocked}
			if !ex.Exclusion.Ends.IsZero() {
				eff.Ends = &metav1.Time{Time: ex.Exclusion.Ends}
			}
			if ex.Item != nil {
				eff.Item = &v1alpha1.ItemReference{Namespace: ex.Item.Namespace, Name: ex.Item.Name, Scope: scopeOf[ex.Item.Namespace], Locked: ex.Item.Locked}
			}
			se.Exclusions = append(se.Exclusions, eff)
		}
		st.Scopes = append(st.Scopes, se)
	}
	if r := e.Result; r != nil {
		st.InView = true
		st.Winner = &v1alpha1.ItemReference{Namespace: r.Item.Namespace, Name: r.Item.Name, Scope: string(r.Scope), Locked: r.Item.Locked}
		for _, o := range r.Overlays {
			st.Overlays = append(st.Overlays, v1alpha1.ItemReference{Namespace: o.Namespace, Name: o.Name, Scope: scopeOf[o.Namespace], Locked: o.Locked})
		}
		st.Conflicts = slices.Clone(r.Conflicts)
	}
	st.Summary = summary(resource, name, namespace, l, e)
	return st
}

// summary says in one sentence why name is or is not in the view.
func summary(resource, name, namespace string, l merge.Lineage, e merge.Explanation) string {
	item := resource + "/" + name
	if l.Namespace == nil {
		return fmt.Sprintf("namespace %s does not exist", namespace)
	}
	if r := e.Result; r != nil {
		s := fmt.Sprintf("%s is in the view of %s from the %s source %s/%s", item, namespace, r.Scope, r.Item.Namespace, r.Item.Name)
		if c := r.Item.FromCandidate; c != "" {
			s += fmt.Sprintf(", in the version of its candidate %s/%s (this namespace's stage is selected)", r.Item.Namespace, c)
		}
		if len(r.Overlays) > 0 {
			s += fmt.Sprintf(", with %d overlay(s) merged on top", len(r.Overlays))
		}
		if len(r.Conflicts) > 0 {
			s += "; " + r.Conflict() // "shadow by local team-b/x blocked: ... is locked"
		}
		return s
	}
	// Not in the view: the last scope whose item was removed says why.
	for i := len(e.Levels) - 1; i >= 0; i-- {
		if lv := e.Levels[i]; lv.Outcome == merge.Excluded {
			return fmt.Sprintf("%s is not in the view of %s: the exclusion of namespace %s removed the %s source %s/%s", item, namespace, lv.By, lv.Scope, lv.Item.Namespace, lv.Item.Name)
		}
	}
	if !l.Tenant {
		return fmt.Sprintf("%s is not in the view of %s: %s is not a tenant, so its view holds its own objects only, and it has none of that name", item, namespace, namespace)
	}
	return fmt.Sprintf("%s is not in the view of %s: no scope of its lineage holds an item of that name", item, namespace)
}

// Preview tells what the views would show if the source namespace/name of
// resource became obj (nil: deleted): each namespace the change reaches
// whose view item would change, and each one a lock, a shadow or an
// exclusion keeps as it is. obj must be of the type the resource's sources
// have (the view's empty object's).
func (a *Answers) Preview(resource, namespace, name string, obj runtime.Object) (v1alpha1.PreviewStatus, error) {
	edit := watchmux.Edit{Namespace: namespace, Name: name}
	if obj != nil {
		acc, err := meta.Accessor(obj)
		if err != nil {
			return v1alpha1.PreviewStatus{}, fmt.Errorf("preview of %s %s/%s: %w", resource, namespace, name, err)
		}
		ann := acc.GetAnnotations()
		// A candidate is one whatever its annotations' errors, as the
		// mirror reads it: a malformed one reaches no namespace.
		c, _ := merge.ParseCandidate(name, ann)
		edit.Item = &merge.Item{Namespace: namespace, Name: name, Locked: merge.IsLocked(ann), Exceptions: merge.ExceptionRulesOf(ann), Overlay: merge.WantsOverlay(ann), Object: obj, Candidate: c}
	}
	var st v1alpha1.PreviewStatus
	err := a.read(func(r watchmux.Reader) { st = preview(r, resource, stagedView(r, resource, edit), obj == nil) })
	return st, err
}

// stagedView sets e.View for the edit of a candidate: the view item it
// stages (its candidate-for), which is what the canary namespaces see
// change. A candidate deleted is the one the mirror holds; one written is
// the edit's (it may become, or stop being, a candidate).
func stagedView(r watchmux.Reader, resource string, e watchmux.Edit) watchmux.Edit {
	it := e.Item
	if it == nil {
		if cur, ok := r.Source(resource, e.Namespace, e.Name); ok {
			it = &cur
		}
	}
	if it != nil && it.Candidate != nil && it.Candidate.For != "" && it.Candidate.For != e.Name {
		e.View = it.Candidate.For
	}
	return e
}

func preview(r watchmux.Reader, resource string, edit watchmux.Edit, deleted bool) v1alpha1.PreviewStatus {
	namespace, name := edit.Namespace, edit.Name
	_, exists := r.Source(resource, namespace, name)
	st := v1alpha1.PreviewStatus{Name: name, Operation: v1alpha1.OperationCreate}
	switch {
	case deleted:
		st.Operation = v1alpha1.OperationDelete
	case exists:
		st.Operation = v1alpha1.OperationUpdate
	}
	reached := r.Reached(resource, namespace)
	sort.Strings(reached)
	st.Reached = len(watchmux.Reach(r, resource, edit))
	view := name
	if edit.View != "" {
		view = edit.View
	}
	for _, ns := range reached {
		before := first(r.Results(resource, ns, view))
		after := first(r.ResultsAfter(resource, ns, edit))
		change := v1alpha1.NamespaceChange{Namespace: ns, Before: itemSummary(before), After: itemSummary(after)}
		switch {
		case before == nil && after != nil:
			change.Type = v1alpha1.ChangeAdded
		case before != nil && after == nil:
			change.Type = v1alpha1.ChangeDeleted
		case before != nil && !sameItem(*before, *after):
			change.Type = v1alpha1.ChangeModified
		}
		if change.Type != "" {
			st.Changed = append(st.Changed, change)
			continue
		}
		// Unchanged: why did the source not show? Ask the state in which
		// it exists: after a create or update, before a delete.
		var with *watchmux.Edit
		if !deleted {
			with = &edit
		}
		e := explain(r, resource, view, r.Lineage(ns), with)
		for _, lv := range e.Levels {
			if lv.Namespace != namespace || lv.Item == nil {
				continue
			}
			reason := map[merge.Outcome]string{
				merge.Shadowed: v1alpha1.UnchangedShadowed, merge.BlockedByLock: v1alpha1.UnchangedLocked, merge.Excluded: v1alpha1.UnchangedExcluded,
			}[lv.Outcome]
			if reason != "" {
				st.Unchanged = append(st.Unchanged, v1alpha1.NamespaceUnchanged{Namespace: ns, Reason: reason, By: lv.By})
			}
		}
	}
	return st
}

func first(rs []merge.Result) *merge.Result {
	if len(rs) == 0 {
		return nil
	}
	return &rs[0]
}

func itemSummary(r *merge.Result) *v1alpha1.ItemSummary {
	if r == nil {
		return nil
	}
	s := &v1alpha1.ItemSummary{
		Source:   v1alpha1.ItemReference{Namespace: r.Item.Namespace, Name: r.Item.Name, Scope: string(r.Scope), Locked: r.Locked()},
		Conflict: r.Conflict(),
	}
	for _, o := range r.Overlays {
		s.Overlays = append(s.Overlays, o.Namespace+"/"+o.Name)
	}
	obj := r.Item.Object
	if r.Object != nil {
		obj = r.Object
	}
	if c, err := content(obj); err == nil {
		if raw, err := json.Marshal(c); err == nil {
			s.Content = &runtime.RawExtension{Raw: raw}
		}
	}
	return s
}

// sameItem reports whether two results show the same view item to a reader:
// the same source, scope and overlays, and the same content (labels,
// annotations and everything but metadata), whatever the objects'
// resourceVersions, uids and timestamps. Conflicts are left out: an edit a
// lock blocks adds one to the locked item, which stays what it was (the
// preview reports that namespace as kept unchanged by the lock).
func sameItem(a, b merge.Result) bool {
	if a.Item.Namespace != b.Item.Namespace || a.Scope != b.Scope || a.OverlaySources() != b.OverlaySources() {
		return false
	}
	objA, objB := a.Item.Object, b.Item.Object
	if a.Object != nil || b.Object != nil {
		objA, objB = a.Object, b.Object
	}
	if objA == objB {
		return true
	}
	ca, errA := content(objA)
	cb, errB := content(objB)
	return errA == nil && errB == nil && reflect.DeepEqual(ca, cb)
}

// lastApplied is kubectl's annotation, which changes with any apply.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// content is what a reader of a view item sees change: every field but
// apiVersion, kind and the metadata the server sets.
func content(obj any) (map[string]any, error) {
	var u map[string]any
	switch o := obj.(type) {
	case runtime.Unstructured:
		u = runtime.DeepCopyJSON(o.UnstructuredContent())
	case nil:
		return nil, fmt.Errorf("no object")
	default:
		var err error
		if u, err = runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err != nil {
			return nil, err
		}
	}
	delete(u, "apiVersion")
	delete(u, "kind")
	md, _ := u["metadata"].(map[string]any)
	kept := map[string]any{}
	if l, ok := md["labels"].(map[string]any); ok && len(l) > 0 {
		kept["labels"] = l
	}
	if a, ok := md["annotations"].(map[string]any); ok {
		delete(a, lastApplied)
		if len(a) > 0 {
			kept["annotations"] = a
		}
	}
	u["metadata"] = kept
	return u, nil
}

// EmptyObject returns an empty source object of resource: the Go type a
// previewed object must have.
func (a *Answers) EmptyObject(resource string) runtime.Object {
	return a.views.EmptyObject(resource)
}
