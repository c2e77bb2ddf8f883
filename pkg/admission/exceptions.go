package admission

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// ExceptionIndex is what the exceptions guard asks of the mirror: the items
// a namespace inherits, whatever excludes them now.
type ExceptionIndex interface {
	// InheritedItems are the items of resource that namespace, with next's
	// labels, inherits as if no namespace of its lineage excluded anything.
	InheritedItems(resource, namespace string, next whatif.NamespaceMeta) ([]merge.Result, error)
}

// RequestExceptionCommand is how a tenant requests an exception, named in
// the refusals of an exclusion an annotation can't make.
const RequestExceptionCommand = "kubectl implicit exceptions request NAME -n %s --exclude %s --reason ... [--expires ...]"

// exceptions judges a namespace's exceptions (docs/design.md, "Exceptions
// (issue 42)"), each annotation by its one kind of writer: the expiry marks
// by the server only (and the server writes nothing else); an exception
// added or changed by its requester, naming served views, no locked item,
// an end in the future and within each source's maximum; an approval added
// or changed by someone else than the requester, allowed approve on each
// source it covers (exception_approvals.go); and no implicit.dev/exclude
// entry added for an item whose source requires an exception. Entries left
// as they were are not judged again; a namespace's creation adds them all.
func (g *Guards) exceptions(ctx context.Context, req *admissionv1.AdmissionRequest, old, obj *unstructured.Unstructured) decision {
	if d := g.expiryMarks(req, old, obj); !d.allowed {
		return d
	}
	inh := &inheritedItems{
		g: g, namespace: obj.GetName(), next: whatif.NamespaceMeta{Labels: obj.GetLabels(), Annotations: obj.GetAnnotations()},
		byResource: map[string][]merge.Result{}, byName: map[string]map[string]merge.Result{},
	}
	if d := g.exceptionSpecs(req, old, obj, inh); !d.allowed {
		return d
	}
	if d := g.exceptionApprovals(ctx, req, old, obj); !d.allowed {
		return d
	}
	return g.exclusionsNeedingExceptions(old, obj, inh)
}

// annotation is u's annotation key; u may be nil.
func annotation(u *unstructured.Unstructured, key string) (string, bool) {
	if u == nil {
		return "", false
	}
	v, ok := u.GetAnnotations()[key]
	return v, ok
}

// annotationChanged reports whether key is set, changed or removed.
func annotationChanged(old, obj *unstructured.Unstructured, key string) bool {
	a, hadA := annotation(old, key)
	b, hasB := annotation(obj, key)
	return a != b || hadA != hasB
}

// expiryMarks: implicit.dev/exceptions-expired is written by the server's
// own identity only, at an exception's end; and a write of it changes
// nothing else of the namespace (besides implicit.dev/parent-uid, when the
// server is trusted to backfill it). The server's other writes of a
// namespace, if any, are judged as anyone's: where its identity is an
// admin's (the tests' control planes run it so), the admin's writes stay
// theirs.
func (g *Guards) expiryMarks(req *admissionv1.AdmissionRequest, old, obj *unstructured.Unstructured) decision {
	key := v1alpha1.AnnotationExceptionsExpired
	changed := annotationChanged(old, obj, key)
	id := g.serverIdentity()
	switch {
	case changed && id == "":
		return unavailable(fmt.Errorf("implicit-apiserver's own identity is not known yet: it alone writes %s", key))
	case changed && req.UserInfo.Username != id:
		return deny("namespace %s: %s is written by implicit-apiserver only, at an exception's end: nobody else may set, change or remove it", obj.GetName(), key)
	case !changed:
		return allow()
	}
	if v, ok := annotation(obj, key); ok {
		if _, err := merge.ParseExceptionsExpired(v); err != nil {
			return deny("namespace %s: %v", obj.GetName(), err)
		}
	}
	keep := []string{key}
	if g.trusted[id] {
		keep = append(keep, v1alpha1.AnnotationParentUID)
	}
	if other := otherChanges(old, obj, keep); other != "" {
		return deny("namespace %s: implicit-apiserver's own identity writes only %s of a namespace; this write changes %s too", obj.GetName(), key, other)
	}
	return allow()
}

// markOnly reports whether req is the server's own write of a namespace's
// expiry marks and of nothing else.
func (g *Guards) markOnly(req *admissionv1.AdmissionRequest) bool {
	id := g.serverIdentity()
	if id == "" || req.UserInfo.Username != id || req.Operation != admissionv1.Update {
		return false
	}
	old, obj, _, ok := namespaceChange(req)
	if !ok || old == nil {
		return false
	}
	key := v1alpha1.AnnotationExceptionsExpired
	return annotationChanged(old, obj, key) && otherChanges(old, obj, []string{key}) == ""
}

// otherChanges names the first label, annotation (but those of keep) or
// spec field that differs between old and obj, or "".
func otherChanges(old, obj *unstructured.Unstructured, keep []string) string {
	if old == nil {
		old = &unstructured.Unstructured{Object: map[string]any{}}
	}
	if !maps.Equal(old.GetLabels(), obj.GetLabels()) {
		return "its labels"
	}
	a, b := maps.Clone(old.GetAnnotations()), maps.Clone(obj.GetAnnotations())
	for _, k := range keep {
		delete(a, k)
		delete(b, k)
	}
	if !maps.Equal(a, b) {
		return "other annotations"
	}
	if !reflect.DeepEqual(old.Object["spec"], obj.Object["spec"]) {
		return "its spec"
	}
	return ""
}

// inheritedItems are the items a namespace inherits, by resource, read
// once per request (ExceptionIndex.InheritedItems).
type inheritedItems struct {
	g          *Guards
	namespace  string
	next       whatif.NamespaceMeta
	byResource map[string][]merge.Result
	byName     map[string]map[string]merge.Result
}

// named are the inherited items ex names: the one of its name, or every
// item of its resource for <resource>/*.
func (in *inheritedItems) named(ex merge.Exclusion) ([]merge.Result, error) {
	all, ok := in.byResource[ex.Resource]
	if !ok {
		var err error
		if all, err = in.g.mirror.Exceptions.InheritedItems(ex.Resource, in.namespace, in.next); err != nil {
			return nil, err
		}
		in.byResource[ex.Resource] = all
		names := make(map[string]merge.Result, len(all))
		for _, r := range all {
			names[r.Item.Name] = r
		}
		in.byName[ex.Resource] = names
	}
	if ex.Name == "*" {
		return all, nil
	}
	if r, ok := in.byName[ex.Resource][ex.Name]; ok {
		return []merge.Result{r}, nil
	}
	return nil, nil
}

// describeItem names an inherited item for messages.
func describeItem(resource string, r merge.Result) string {
	return fmt.Sprintf("%s %s/%s (%s)", resource, r.Item.Namespace, r.Item.Name, r.Scope)
}

// exclusionsNeedingExceptions refuses an implicit.dev/exclude entry added
// that names an inherited item whose source requires an approved exception
// or one with an end: the annotation would silently except nothing, and
// the way is to request an exception. A locked item is only warned of
// (exclusions).
func (g *Guards) exclusionsNeedingExceptions(old, obj *unstructured.Unstructured, inh *inheritedItems) decision {
	key := v1alpha1.AnnotationExclude
	next, ok := annotation(obj, key)
	if !ok || !annotationChanged(old, obj, key) {
		return allow()
	}
	prev, _ := annotation(old, key)
	before := map[string]bool{}
	for _, e := range exclusionEntries(prev) {
		before[e] = true
	}
	views := g.views()
	var refused []string
	var entry string
	for _, e := range exclusionEntries(next) {
		ex, errs := merge.ParseExclusions(e)
		if before[e] || len(errs) > 0 || !slices.Contains(views, ex[0].Resource) {
			continue // judged by exclusions
		}
		items, err := inh.named(ex[0])
		if err != nil {
			return unavailable(fmt.Errorf("reading what namespace %s inherits: %w", obj.GetName(), err))
		}
		for _, r := range items {
			rules := r.Item.Exceptions
			if r.Locked() || !rules.Approval && !rules.NeedsEnd() {
				continue
			}
			what := "an approved exception"
			if !rules.Approval {
				what = "an exception with an end"
			}
			refused = append(refused, fmt.Sprintf("%s requires %s", describeItem(ex[0].Resource, r), what))
			if entry == "" {
				entry = ex[0].String()
			}
		}
	}
	if len(refused) == 0 {
		return allow()
	}
	return deny("namespace %s: %s can't exclude these items: %s (%s on the source); request an exception: "+RequestExceptionCommand,
		obj.GetName(), key, strings.Join(firstOf(refused), "; "), v1alpha1.AnnotationExceptionApproval+", "+v1alpha1.AnnotationExceptionMaxDuration, obj.GetName(), entry)
}
