package views_test

import (
	"bytes"
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
)

// stage labels a namespace implicit.dev/stage.
func stage(s string) nsOpt {
	return func(ns *corev1.Namespace) { ns.Labels[v1alpha1.LabelStage] = s }
}

// candidate makes a source a candidate for forName, seen by the canaries.
func candidate(forName string) objOpt {
	return func(m *metav1.ObjectMeta) {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[v1alpha1.AnnotationCandidateFor] = forName
		m.Annotations[v1alpha1.AnnotationCanarySelector] = v1alpha1.LabelStage + "=canary"
		m.Annotations["note"] = "staged"
	}
}

// stagedSources are a global binding g and its candidate g.next, which
// names another subject and has another resourceVersion.
func stagedSources() (stable, next *rbacv1.RoleBinding) {
	stable = roleBinding(global, "g")
	next = roleBinding(global, "g.next", candidate("g"))
	next.ResourceVersion = "8"
	for _, rb := range []*rbacv1.RoleBinding{stable, next} {
		rb.TypeMeta = metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"}
	}
	next.Subjects = []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "canary-testers"}}
	return stable, next
}

// TestCandidateItem checks the view item a canary gets from a candidate:
// the stable name and uid, the candidate's content, the candidate
// annotation, and none of the annotations that made the object a
// candidate; other namespaces get the stable item, and the candidate's own
// namespace the candidate itself.
func TestCandidateItem(t *testing.T) {
	t.Parallel()
	stable, next := stagedSources()
	view, mux := newView(rolebindings,
		[]*corev1.Namespace{namespace(global), namespace("team-a", stage("canary")), namespace("team-b", stage("prod"))}, stable, next)
	rv := currentRV(t, mux)
	ctx := context.Background()

	got, err := view.Get(ctx, "team-a", "g")
	if err != nil {
		t.Fatalf("Get team-a/g: %v", err)
	}
	want := wantItem(next, "team-a", merge.ScopeGlobal, "", rv)
	want.Name = "g"
	want.UID = views.UID(stable.UID, "team-a")
	delete(want.Annotations, v1alpha1.AnnotationCandidateFor)
	delete(want.Annotations, v1alpha1.AnnotationCanarySelector)
	want.Annotations[v1alpha1.AnnotationSourceUID] = string(stable.UID)
	want.Annotations[v1alpha1.AnnotationCandidate] = "g.next"
	if rb := got.(*rbacv1.RoleBinding); !equalItems(rb, want) {
		t.Errorf("team-a/g:\n got %+v\nwant %+v", rb.ObjectMeta, want.ObjectMeta)
	}

	got, err = view.Get(ctx, "team-b", "g")
	if err != nil {
		t.Fatalf("Get team-b/g: %v", err)
	}
	if rb := got.(*rbacv1.RoleBinding); !equalItems(rb, wantItem(stable, "team-b", merge.ScopeGlobal, "", rv)) {
		t.Errorf("team-b/g is not the stable item: %+v", rb.ObjectMeta)
	}

	for _, ns := range []string{"team-a", "team-b"} {
		if _, err := view.Get(ctx, ns, "g.next"); !apierrors.IsNotFound(err) {
			t.Errorf("Get %s/g.next: %v, want NotFound: a candidate never shows under its own name below", ns, err)
		}
		items, _, err := view.List(ctx, ns)
		if err != nil {
			t.Fatalf("List %s: %v", ns, err)
		}
		if len(items) != 1 || names(items)[0] != "g" {
			t.Errorf("List %s: %q, want [g]", ns, names(items))
		}
	}

	// The candidate's own namespace shows it as it is.
	got, err = view.Get(ctx, global, "g.next")
	if err != nil {
		t.Fatalf("Get the global namespace's g.next: %v", err)
	}
	if rb := got.(*rbacv1.RoleBinding); !equalItems(rb, wantItem(next, global, merge.ScopeLocal, "", rv)) {
		t.Errorf("the global namespace's g.next is not the candidate as it is: %+v", rb.ObjectMeta)
	}
}

func equalItems(a, b *rbacv1.RoleBinding) bool {
	return a.Name == b.Name && a.Namespace == b.Namespace && a.UID == b.UID &&
		a.ResourceVersion == b.ResourceVersion && mapsEqual(a.Labels, b.Labels) &&
		mapsEqual(a.Annotations, b.Annotations) && len(a.Subjects) == len(b.Subjects) &&
		(len(a.Subjects) == 0 || a.Subjects[0] == b.Subjects[0])
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func names(objs []runtime.Object) []string {
	var out []string
	for _, o := range objs {
		acc, _ := meta.Accessor(o)
		out = append(out, acc.GetName())
	}
	return out
}

// TestCandidateItemSplices checks that a candidate's item spliced from a
// batch template has the bytes of the item built whole: the stable name
// and uid, not the candidate's, in every encoding.
func TestCandidateItemSplices(t *testing.T) {
	t.Parallel()
	stable, next := stagedSources()
	objs := views.NewObjects(newObject(), 0)
	staged := merge.Result{Item: merge.Item{
		Namespace: global, Name: "g", Object: next, UID: stable.UID, FromCandidate: "g.next",
	}, Scope: merge.ScopeGlobal}
	// The same candidate object as a staged creation (its own uid) must
	// not share the template of its stand-in.
	creation := staged
	creation.Item.UID = next.UID
	for _, r := range []merge.Result{staged, creation} {
		for _, ns := range []string{"team-a", "team-c"} {
			spliced, err := objs.BatchItem(rolebindings.Resource, ns, r, "12")
			if err != nil {
				t.Fatal(err)
			}
			whole, err := objs.Item(rolebindings.Resource, ns, r, "12")
			if err != nil {
				t.Fatal(err)
			}
			for encName, enc := range encoders(t) {
				var got, want bytes.Buffer
				id := runtime.Identifier(encName)
				// Some encodings fail for every item (YAML inside a watch
				// frame, as FuzzSplice says): they must fail alike.
				errGot := spliced.(runtime.CacheableObject).CacheEncode(id, enc, &got)
				errWant := whole.(runtime.CacheableObject).CacheEncode(id, enc, &want)
				if (errGot == nil) != (errWant == nil) {
					t.Fatalf("%s in %s: errors differ: spliced %v, whole %v", encName, ns, errGot, errWant)
				}
				if !bytes.Equal(got.Bytes(), want.Bytes()) {
					t.Errorf("%s in %s: spliced bytes differ\n got %q\nwant %q", encName, ns, got.Bytes(), want.Bytes())
				}
			}
			obj := spliced.(runtime.CacheableObject).GetObject()
			acc, _ := meta.Accessor(obj)
			if acc.GetName() != "g" || acc.GetUID() != views.UID(r.Item.UID, ns) || acc.GetAnnotations()[v1alpha1.AnnotationCandidate] != "g.next" {
				t.Errorf("%s: item %s uid %s candidate %q, want g, %s, g.next", ns, acc.GetName(), acc.GetUID(), acc.GetAnnotations()[v1alpha1.AnnotationCandidate], views.UID(r.Item.UID, ns))
			}
		}
	}
}
