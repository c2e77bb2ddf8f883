package views_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
)

// spoofing is a source object that carries provenance labels and
// annotations of its own, owner references and managed fields.
func spoofing(namespace, name string) *rbacv1.RoleBinding {
	rb := roleBinding(namespace, name)
	rb.ResourceVersion = "4242"
	rb.Generation = 3
	rb.CreationTimestamp = metav1.Unix(1700000000, 0)
	rb.Labels = map[string]string{
		"app":                         "billing",
		v1alpha1.LabelScope:           "global",
		v1alpha1.LabelSourceNamespace: "implicit-global",
		v1alpha1.LabelParent:          "kept-as-is",
	}
	rb.Annotations = map[string]string{
		"note":                                   "hello",
		v1alpha1.AnnotationConflict:              "spoofed conflict",
		v1alpha1.AnnotationSourceUID:             "spoofed-uid",
		v1alpha1.AnnotationSourceResourceVersion: "1",
		v1alpha1.AnnotationSourceCluster:         "spoofed-hub",
		v1alpha1.AnnotationOverlays:              "spoofed/overlay",
	}
	rb.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "owner-uid"}}
	rb.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "rbac.authorization.k8s.io/v1"}}
	return rb
}

// wantItem is the view item of source in namespace at the server's
// resourceVersion rv, built by hand from DESIGN.md.
func wantItem(source *rbacv1.RoleBinding, namespace string, scope merge.Scope, conflict, rv string) *rbacv1.RoleBinding {
	want := source.DeepCopy()
	want.Namespace = namespace
	want.UID = views.UID(source.UID, namespace)
	want.ResourceVersion = rv
	want.OwnerReferences = nil
	want.ManagedFields = nil
	want.Labels = map[string]string{
		v1alpha1.LabelScope:           string(scope),
		v1alpha1.LabelSourceNamespace: source.Namespace,
	}
	for k, v := range source.Labels {
		if k != v1alpha1.LabelScope && k != v1alpha1.LabelSourceNamespace {
			want.Labels[k] = v
		}
	}
	want.Annotations = map[string]string{
		v1alpha1.AnnotationSourceUID:             string(source.UID),
		v1alpha1.AnnotationSourceResourceVersion: source.ResourceVersion,
	}
	for k, v := range source.Annotations {
		switch k {
		case v1alpha1.AnnotationConflict, v1alpha1.AnnotationSourceUID, v1alpha1.AnnotationSourceResourceVersion,
			v1alpha1.AnnotationSourceCluster, v1alpha1.AnnotationOverlays:
		default:
			want.Annotations[k] = v
		}
	}
	if conflict != "" {
		want.Annotations[v1alpha1.AnnotationConflict] = conflict
	}
	return want
}

func TestProvenance(t *testing.T) {
	t.Parallel()
	globalSpoof := spoofing(global, "global-spoof")
	globalSpoof.Labels[v1alpha1.LabelScope] = "local" // claims to be local
	parentSpoof := spoofing("org", "parent-spoof")
	localSpoof := spoofing("team", "local-spoof")
	plain := roleBinding(global, "plain") // no labels or annotations at all
	sources := []runtime.Object{globalSpoof, parentSpoof, localSpoof, plain}
	before := snapshot(sources)
	view, mux := newView(rolebindings,
		[]*corev1.Namespace{namespace(global), namespace("org"), namespace("team", parent("org"))}, sources...)
	rv := currentRV(t, mux)
	parseRV(t, rv)

	plainWant := wantItem(plain, "team", merge.ScopeGlobal, "", rv)
	tests := []struct {
		name      string
		namespace string
		item      string
		want      *rbacv1.RoleBinding
	}{
		{name: "global source claiming scope local", namespace: "team", item: "global-spoof", want: wantItem(globalSpoof, "team", merge.ScopeGlobal, "", rv)},
		{name: "parent source claiming scope global", namespace: "team", item: "parent-spoof", want: wantItem(parentSpoof, "team", merge.ScopeParent, "", rv)},
		{name: "local source claiming scope global and a conflict", namespace: "team", item: "local-spoof", want: wantItem(localSpoof, "team", merge.ScopeLocal, "", rv)},
		{name: "source without labels or annotations", namespace: "team", item: "plain", want: plainWant},
		{name: "the global namespace's own view", namespace: global, item: "global-spoof", want: wantItem(globalSpoof, global, merge.ScopeLocal, "", rv)},
		{name: "the parent's own view", namespace: "org", item: "parent-spoof", want: wantItem(parentSpoof, "org", merge.ScopeLocal, "", rv)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := view.Get(context.Background(), tt.namespace, tt.item)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			rb, ok := got.(*rbacv1.RoleBinding)
			if !ok {
				t.Fatalf("Get returned a %T, want *rbacv1.RoleBinding", got)
			}
			if !apiequality.Semantic.DeepEqual(rb, tt.want) {
				t.Errorf("Get(%q, %q) =\n%#v\nwant\n%#v", tt.namespace, tt.item, rb, tt.want)
			}
			// Pin the fields the design names, so a failure says which.
			// The server's own version, never the source's.
			if rb.ResourceVersion != rv {
				t.Errorf("resourceVersion = %q, want the mux's %q", rb.ResourceVersion, rv)
			}
			if rb.ManagedFields != nil || rb.OwnerReferences != nil {
				t.Errorf("managedFields = %v, ownerReferences = %v; want both cleared", rb.ManagedFields, rb.OwnerReferences)
			}
			if rb.Annotations[v1alpha1.AnnotationSourceCluster] != "" || rb.Annotations[v1alpha1.AnnotationOverlays] != "" {
				t.Errorf("spoofed source-cluster or overlays annotation kept: %v", rb.Annotations)
			}
		})
	}

	t.Run("list items carry the same provenance", func(t *testing.T) {
		t.Parallel()
		list, listRV, err := view.List(context.Background(), "team")
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		parseRV(t, listRV)
		if listRV != rv {
			t.Errorf("List resourceVersion = %q, want the mux's %q", listRV, rv)
		}
		want := []runtime.Object{
			wantItem(globalSpoof, "team", merge.ScopeGlobal, "", listRV),
			wantItem(localSpoof, "team", merge.ScopeLocal, "", listRV),
			wantItem(parentSpoof, "team", merge.ScopeParent, "", listRV),
			plainWant,
		}
		if !apiequality.Semantic.DeepEqual(list, want) {
			t.Errorf("List(team) =\n%#v\nwant\n%#v", list, want)
		}
	})

	t.Run("returned items are the caller's to keep", func(t *testing.T) {
		t.Parallel()
		got, err := view.Get(context.Background(), "team", "plain")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		rb := got.(*rbacv1.RoleBinding)
		rb.Labels["scribbled"] = "yes"
		rb.Annotations["scribbled"] = "yes"
		rb.Subjects[0].Name = "scribbled"
		again, err := view.Get(context.Background(), "team", "plain")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if !apiequality.Semantic.DeepEqual(again, plainWant) {
			t.Errorf("after the caller changed a returned item, Get = %#v, want %#v", again, plainWant)
		}
	})

	t.Cleanup(func() {
		if after := snapshot(sources); !apiequality.Semantic.DeepEqual(after, before) {
			t.Errorf("source objects in the mux were mutated:\nbefore %#v\nafter  %#v", before, after)
		}
	})
}

// TestSourcesNotMutated runs every read of the test cluster and checks the
// source objects and namespaces are as they were.
func TestSourcesNotMutated(t *testing.T) {
	t.Parallel()
	sources := worldRoleBindings()
	nss := hierarchy()
	nssBefore := make([]runtime.Object, 0, len(nss))
	for _, ns := range nss {
		nssBefore = append(nssBefore, ns.DeepCopy())
	}
	before := snapshot(sources)
	view, _ := newView(rolebindings, nss, sources...)

	all, _, err := view.List(context.Background(), "")
	if err != nil {
		t.Fatalf(`List(""): %v`, err)
	}
	for _, obj := range all {
		m, _ := meta.Accessor(obj)
		if _, err := view.Get(context.Background(), m.GetNamespace(), m.GetName()); err != nil {
			t.Fatalf("Get(%s/%s): %v", m.GetNamespace(), m.GetName(), err)
		}
		// Scribble on the result: it must be a copy.
		m.GetLabels()["scribbled"] = "yes"
		m.SetName("scribbled")
	}
	if after := snapshot(sources); !apiequality.Semantic.DeepEqual(after, before) {
		t.Errorf("source objects were mutated:\nbefore %#v\nafter  %#v", before, after)
	}
	for i, ns := range nss {
		if !reflect.DeepEqual(runtime.Object(ns), nssBefore[i]) {
			t.Errorf("namespace %s was mutated: %#v", ns.Name, ns)
		}
	}
}

func TestUIDs(t *testing.T) {
	t.Parallel()
	view, _ := newView(rolebindings,
		[]*corev1.Namespace{namespace(global), namespace("team-1"), namespace("team-2")},
		roleBinding(global, "a"), roleBinding(global, "b"))
	uidOf := func(t *testing.T, namespace, name string) types.UID {
		t.Helper()
		obj, err := view.Get(context.Background(), namespace, name)
		if err != nil {
			t.Fatalf("Get(%s, %s): %v", namespace, name, err)
		}
		m, _ := meta.Accessor(obj)
		return m.GetUID()
	}
	listUID := func(t *testing.T, namespace, name string) types.UID {
		t.Helper()
		obj, err := find(view, namespace, name)
		if err != nil {
			t.Fatalf("List(%s) item %s: %v", namespace, name, err)
		}
		m, _ := meta.Accessor(obj)
		return m.GetUID()
	}

	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{name: "derived from source uid and viewing namespace", check: func(t *testing.T) {
			if got, want := uidOf(t, "team-1", "a"), views.UID(sourceUID(global, "a"), "team-1"); got != want {
				t.Errorf("uid = %q, want views.UID(source, team-1) = %q", got, want)
			}
		}},
		{name: "stable across calls and between Get and List", check: func(t *testing.T) {
			first := uidOf(t, "team-1", "a")
			if again := uidOf(t, "team-1", "a"); again != first {
				t.Errorf("second Get uid = %q, first %q", again, first)
			}
			if listed := listUID(t, "team-1", "a"); listed != first {
				t.Errorf("List uid = %q, Get uid %q", listed, first)
			}
		}},
		{name: "differs per viewing namespace", check: func(t *testing.T) {
			if one, two := uidOf(t, "team-1", "a"), uidOf(t, "team-2", "a"); one == two {
				t.Errorf("team-1 and team-2 views of one source share uid %q", one)
			}
		}},
		{name: "differs per source", check: func(t *testing.T) {
			if a, b := uidOf(t, "team-1", "a"), uidOf(t, "team-1", "b"); a == b {
				t.Errorf("two sources share uid %q in one view", a)
			}
		}},
		{name: "differs from the source uid, even in the source's own namespace", check: func(t *testing.T) {
			if got := uidOf(t, global, "a"); got == sourceUID(global, "a") {
				t.Errorf("view uid %q equals the source uid", got)
			}
		}},
		{name: "is a UUID", check: func(t *testing.T) {
			if _, err := uuid.Parse(string(uidOf(t, "team-1", "a"))); err != nil {
				t.Errorf("uid is not a UUID: %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.check(t)
		})
	}
}

func TestUID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		a, b      [2]string // source uid, namespace
		wantEqual bool
	}{
		{name: "same inputs", a: [2]string{"u1", "ns"}, b: [2]string{"u1", "ns"}, wantEqual: true},
		{name: "other namespace", a: [2]string{"u1", "ns"}, b: [2]string{"u1", "ns2"}},
		{name: "other source", a: [2]string{"u1", "ns"}, b: [2]string{"u2", "ns"}},
		{name: "swapped", a: [2]string{"u1", "ns"}, b: [2]string{"ns", "u1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := views.UID(types.UID(tt.a[0]), tt.a[1])
			b := views.UID(types.UID(tt.b[0]), tt.b[1])
			if (a == b) != tt.wantEqual {
				t.Errorf("UID%v = %q, UID%v = %q; want equal: %v", tt.a, a, tt.b, b, tt.wantEqual)
			}
		})
	}
}
