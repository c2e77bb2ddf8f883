package offline

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// Report is what changing the files from one world to another changes:
// the guards' answer to each edit, applied in order, and each namespace's
// views.
type Report struct {
	// Edits are the writes that turn the "from" files into the "to" files,
	// in the order Diff judges them.
	Edits []JudgedEdit `json:"edits"`
	// Namespaces are the namespaces whose views or hierarchy change.
	Namespaces []NamespaceDiff `json:"namespaces"`
	// Now is the reference time both sides are read at: the exceptions
	// ended by then are marked expired (Options.Now).
	Now time.Time `json:"now"`
}

// JudgedEdit is one write and the guards' answer.
type JudgedEdit struct {
	Operation Operation `json:"operation"`
	Object    string    `json:"object"`
	// Manifest is the object written (for DELETE, deleted), as the files
	// state it.
	Manifest *unstructured.Unstructured `json:"-"`
	Verdict  Verdict                    `json:"verdict"`
	// Reach is how many namespaces' views an edit of this source may
	// change (a source's subtree; every namespace for a global one).
	Reach int `json:"reach,omitempty"`
}

// Refused reports whether any edit is refused.
func (r Report) Refused() bool {
	for _, e := range r.Edits {
		if !e.Verdict.Allowed {
			return true
		}
	}
	return false
}

// NamespaceDiff is what changes in one namespace.
type NamespaceDiff struct {
	Namespace string `json:"namespace"`
	// ProblemBefore and ProblemAfter are its hierarchy problems (a cycle,
	// a missing parent), when they differ.
	ProblemBefore string     `json:"problemBefore,omitempty"`
	ProblemAfter  string     `json:"problemAfter,omitempty"`
	Views         []ViewDiff `json:"views,omitempty"`
}

// ViewDiff is what changes in one view.
type ViewDiff struct {
	Resource string       `json:"resource"`
	Added    []ItemRef    `json:"added,omitempty"`
	Removed  []ItemRef    `json:"removed,omitempty"`
	Changed  []ItemChange `json:"changed,omitempty"`
}

// ItemRef names a view item, where it comes from, and what a lock blocked.
type ItemRef struct {
	Name            string      `json:"name"`
	Scope           merge.Scope `json:"scope"`
	SourceNamespace string      `json:"sourceNamespace"`
	Conflict        string      `json:"conflict,omitempty"`
}

// ItemChange is a view item that changes: its provenance before and after,
// and the paths of the fields that change.
type ItemChange struct {
	Before ItemRef     `json:"before"`
	After  ItemRef     `json:"after"`
	Fields []FieldDiff `json:"fields"`
}

// FieldDiff is one changed field; its values are kept only with data.
type FieldDiff struct {
	Path   string `json:"path"`
	Before any    `json:"before,omitempty"`
	After  any    `json:"after,omitempty"`
}

// DiffOptions tune Diff.
type DiffOptions struct {
	// Requester makes the edits (default Admin).
	Requester Requester
	// ShowData keeps field values in the report; without it only paths.
	ShowData bool
}

// Diff judges the edits that turn from's files into to's, each with the
// guards of from as the previous edits left it (an edit refused is not
// applied, as the cluster would not apply it), then compares every view of
// every namespace of from (after the edits the guards allowed) with to's.
// The order is kubectl apply's best case: namespaces created or changed,
// parents first; then sources created or changed; then sources deleted;
// then namespaces deleted.
func Diff(ctx context.Context, fromObjs, toObjs []Object, o Options, d DiffOptions) (Report, error) {
	if o.Now.IsZero() {
		o.Now = time.Now() // one reference time for both sides
	}
	o.Now = o.Now.UTC().Truncate(time.Second)
	from, err := Build(fromObjs, o)
	if err != nil {
		return Report{}, fmt.Errorf("from: %w", err)
	}
	to, err := Build(toObjs, o)
	if err != nil {
		return Report{}, fmt.Errorf("to: %w", err)
	}
	before, err := Build(fromObjs, o)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Now: o.Now}
	for _, e := range edits(from, to) {
		e.Requester = d.Requester
		v, err := from.Judge(ctx, e)
		if err != nil {
			return Report{}, err
		}
		key := KeyOf(e.Object)
		je := JudgedEdit{Operation: e.Operation, Object: key.String(), Manifest: e.Object, Verdict: v}
		if k, ok := from.byKind[schema.GroupKind{Group: key.Group, Kind: key.Kind}]; ok {
			je.Reach = from.Reached(k.Resource(), key.Namespace)
		}
		rep.Edits = append(rep.Edits, je)
		if v.Allowed {
			if err := from.apply(e); err != nil {
				return Report{}, err
			}
		}
	}
	names := map[string]bool{}
	for _, n := range before.Namespaces() {
		names[n] = true
	}
	for _, n := range to.Namespaces() {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, ns := range sorted {
		nd := NamespaceDiff{Namespace: ns}
		pb, pa := problemText(before.Problem(ns)), problemText(to.Problem(ns))
		if pb != pa {
			nd.ProblemBefore, nd.ProblemAfter = pb, pa
		}
		for _, k := range to.kinds {
			r := k.Resource()
			a, err := viewOrNone(before, ns, r)
			if err != nil {
				return Report{}, err
			}
			b, err := to.View(ns, r)
			if err != nil {
				return Report{}, err
			}
			if vd, ok := diffView(r, a, b, d.ShowData); ok {
				nd.Views = append(nd.Views, vd)
			}
		}
		if nd.ProblemBefore != "" || nd.ProblemAfter != "" || len(nd.Views) > 0 {
			rep.Namespaces = append(rep.Namespaces, nd)
		}
	}
	return rep, nil
}

// viewOrNone is w's view, empty when w does not serve the resource.
func viewOrNone(w *World, ns, resource string) ([]Item, error) {
	if _, ok := w.KindOf(resource); !ok {
		return nil, nil
	}
	return w.View(ns, resource)
}

func problemText(p *merge.Problem) string {
	if p == nil {
		return ""
	}
	return p.String()
}

// edits are the writes that turn a's files into b's, in Diff's order.
func edits(a, b *World) []Edit {
	var nsWrites, srcWrites, srcDeletes, nsDeletes []Edit
	isNS := func(k Key) bool { return k.Group == "" && k.Kind == kindNamespace }
	isSource := func(k Key) bool {
		_, ok := b.byKind[schema.GroupKind{Group: k.Group, Kind: k.Kind}]
		return ok
	}
	for _, k := range b.keys() {
		if !isNS(k) && !isSource(k) {
			continue
		}
		obj := b.files[k]
		prev, had := a.files[k]
		switch {
		case !had && isNS(k) && a.namespaces[k.Name] != nil:
			// A namespace that existed without a manifest (a built-in one,
			// or one a source was in): an update.
			nsWrites = append(nsWrites, Edit{Operation: Update, Object: obj})
		case !had && isNS(k):
			nsWrites = append(nsWrites, Edit{Operation: Create, Object: obj})
		case !had:
			srcWrites = append(srcWrites, Edit{Operation: Create, Object: obj})
		case !reflect.DeepEqual(prev.Object, obj.Object) && isNS(k):
			nsWrites = append(nsWrites, Edit{Operation: Update, Object: obj})
		case !reflect.DeepEqual(prev.Object, obj.Object):
			srcWrites = append(srcWrites, Edit{Operation: Update, Object: obj})
		}
	}
	for _, k := range a.keys() {
		if _, ok := b.files[k]; ok || (!isNS(k) && !isSource(k)) {
			continue
		}
		if isNS(k) {
			nsDeletes = append(nsDeletes, Edit{Operation: Delete, Object: a.files[k]})
		} else {
			srcDeletes = append(srcDeletes, Edit{Operation: Delete, Object: a.files[k]})
		}
	}
	// Parents first: by depth in b.
	depth := func(e Edit) int {
		n := 0
		for cur, seen := e.Object.GetName(), map[string]bool{}; !seen[cur]; n++ {
			seen[cur] = true
			ns, ok := b.namespaces[cur]
			if !ok || ns.Labels[v1alpha1.LabelParent] == "" {
				break
			}
			cur = ns.Labels[v1alpha1.LabelParent]
		}
		return n
	}
	sort.SliceStable(nsWrites, func(i, j int) bool { return depth(nsWrites[i]) < depth(nsWrites[j]) })
	out := append(nsWrites, srcWrites...)
	out = append(out, srcDeletes...)
	return append(out, nsDeletes...)
}

// apply makes e in w, as the cluster would once the guards allowed it.
func (w *World) apply(e Edit) error {
	key := KeyOf(e.Object)
	if key.Group == "" && key.Kind == kindNamespace {
		if e.Operation == Delete {
			ns := w.namespaces[key.Name]
			delete(w.namespaces, key.Name)
			delete(w.files, key)
			if ns != nil {
				w.mux.OnNamespace(ns, true)
			}
			return nil
		}
		ns, err := namespaceOf(e.Object)
		if err != nil {
			return err
		}
		ns.UID = namespaceUID(ns.Name)
		w.rv++
		ns.ResourceVersion = strconv.Itoa(w.rv)
		recordParentUID(ns, w.namespaces)
		w.namespaces[ns.Name] = ns
		w.files[key] = e.Object
		w.mux.OnNamespace(ns, false)
		return nil
	}
	k, ok := w.byKind[schema.GroupKind{Group: key.Group, Kind: key.Kind}]
	if !ok {
		return nil
	}
	w.rv++
	if e.Operation == Delete {
		prev, ok := w.files[key]
		if !ok {
			return nil
		}
		obj, err := w.sourceObject(k, prev, strconv.Itoa(w.rv))
		if err != nil {
			return err
		}
		delete(w.files, key)
		w.mux.OnSource(k.Resource(), obj, true)
		return nil
	}
	obj, err := w.sourceObject(k, e.Object, strconv.Itoa(w.rv))
	if err != nil {
		return err
	}
	w.files[key] = e.Object
	w.mux.OnSource(k.Resource(), obj, false)
	return nil
}

// diffView compares two views of one namespace.
func diffView(resource string, a, b []Item, showData bool) (ViewDiff, bool) {
	vd := ViewDiff{Resource: resource}
	before := map[string]Item{}
	for _, it := range a {
		before[it.Name] = it
	}
	after := map[string]bool{}
	for _, it := range b {
		after[it.Name] = true
		prev, ok := before[it.Name]
		if !ok {
			vd.Added = append(vd.Added, refOf(it))
			continue
		}
		fields := fieldDiffs("", comparable(prev.Object), comparable(it.Object), showData)
		if len(fields) > 0 || refOf(prev) != refOf(it) {
			vd.Changed = append(vd.Changed, ItemChange{Before: refOf(prev), After: refOf(it), Fields: fields})
		}
	}
	for _, it := range a {
		if !after[it.Name] {
			vd.Removed = append(vd.Removed, refOf(it))
		}
	}
	return vd, len(vd.Added)+len(vd.Removed)+len(vd.Changed) > 0
}

func refOf(it Item) ItemRef {
	return ItemRef{Name: it.Name, Scope: it.Scope, SourceNamespace: it.SourceNamespace, Conflict: it.Conflict}
}

// comparable is a view item's content without what differs between two
// builds of the same files: versions.
func comparable(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	c.SetResourceVersion("")
	ann := c.GetAnnotations()
	delete(ann, v1alpha1.AnnotationSourceResourceVersion)
	c.SetAnnotations(ann)
	return c.Object
}

// fieldDiffs lists the leaf paths where a and b differ, sorted.
func fieldDiffs(prefix string, a, b any, showData bool) []FieldDiff {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		var out []FieldDiff
		for _, k := range sorted {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			out = append(out, fieldDiffs(p, am[k], bm[k], showData)...)
		}
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	f := FieldDiff{Path: prefix}
	if showData {
		f.Before, f.After = a, b
	}
	return []FieldDiff{f}
}

// MarshalJSON keeps a report's JSON stable.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	if r.Edits == nil {
		r.Edits = []JudgedEdit{}
	}
	if r.Namespaces == nil {
		r.Namespaces = []NamespaceDiff{}
	}
	return json.Marshal(plain(r))
}
