package views_test

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
)

// Items of results with overlays: the served object is the merged one,
// with the base's provenance and the overlays named.

// overlaid returns a result of g1 in team's view: the global base (which
// spoofs provenance), overlaid by org's and team's g1, merged into an
// object with their subjects and a label of their own.
func overlaid() (merge.Result, *rbacv1.RoleBinding) {
	base := spoofing(global, "g1")
	merged := base.DeepCopy()
	merged.Labels["tier"] = "gold"
	merged.Subjects = append(merged.Subjects,
		rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "org:g1"},
		rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "team:g1"})
	return merge.Result{
		Item:  merge.Item{Namespace: global, Name: "g1", Object: base},
		Scope: merge.ScopeGlobal,
		Overlays: []merge.Item{
			{Namespace: "org", Name: "g1", Object: roleBinding("org", "g1")},
			{Namespace: "team", Name: "g1", Object: roleBinding("team", "g1")},
		},
		Object: merged,
	}, merged
}

func TestOverlaidItem(t *testing.T) {
	t.Parallel()
	r, merged := overlaid()
	plain := spoofing(global, "plain")
	want := wantItem(merged, "team", merge.ScopeGlobal, "", "1")
	want.Annotations[v1alpha1.AnnotationOverlays] = "org/g1,team/g1"
	wantPlain := wantItem(plain, "team", merge.ScopeGlobal, "", "1")

	view := views.New(rolebindings, fakeSource{results: []merge.Result{
		r,
		{Item: merge.Item{Namespace: global, Name: "plain", Object: plain}, Scope: merge.ScopeGlobal},
	}})
	ctx := context.Background()
	list, _, err := view.List(ctx, "team")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(list) != 2 {
		t.Fatalf("List = %d items, want 2", len(list))
	}
	got, err := view.Get(ctx, "team", "g1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	tests := []struct {
		name string
		got  runtime.Object
		want *rbacv1.RoleBinding
	}{
		{name: "Get of an overlaid item serves the merged object", got: got, want: want},
		{name: "List of an overlaid item serves the merged object", got: list[0], want: want},
		{name: "a spoofed overlays annotation without overlays is removed", got: list[1], want: wantPlain},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rb := viewObject(t, tt.got)
			if !apiequality.Semantic.DeepEqual(rb, tt.want) {
				t.Errorf("item =\n%#v\nwant\n%#v", rb, tt.want)
			}
			// The points of the merge, spelled out.
			if rb.Annotations[v1alpha1.AnnotationSourceUID] != string(sourceUID(global, rb.Name)) ||
				rb.Labels[v1alpha1.LabelSourceNamespace] != global || rb.Labels[v1alpha1.LabelScope] != string(merge.ScopeGlobal) {
				t.Errorf("provenance = %v %v, want the global base's", rb.Labels, rb.Annotations)
			}
			if rb.UID != views.UID(sourceUID(global, rb.Name), "team") {
				t.Errorf("uid = %s, want the base's in team", rb.UID)
			}
		})
	}
	if rb := viewObject(t, got); len(rb.Subjects) != 3 || rb.Labels["tier"] != "gold" {
		t.Errorf("Get = subjects %v, labels %v; want the merged object's", rb.Subjects, rb.Labels)
	}
	if base := r.Item.Object.(*rbacv1.RoleBinding); base.Annotations[v1alpha1.AnnotationOverlays] != "spoofed/overlay" || len(merged.Subjects) != 3 {
		t.Error("serving the item changed its base or its merged object")
	}
}

// widget returns an unstructured source object of a custom kind.
func widget(namespace, name, color string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"metadata": map[string]any{
			"namespace": namespace, "name": name, "uid": string(sourceUID(namespace, name)), "resourceVersion": "7",
			"annotations": map[string]any{v1alpha1.AnnotationOverlays: "spoofed/overlay"},
		},
		"spec": map[string]any{"color": color},
	}}
	return u
}

var widgetKind = schema.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: "Widget"}

func TestUnstructuredKinds(t *testing.T) {
	t.Parallel()
	base := widget(global, "w", "red")
	merged := widget(global, "w", "blue")
	results := []merge.Result{
		{Item: merge.Item{Namespace: global, Name: "w", Object: base}, Scope: merge.ScopeGlobal,
			Overlays: []merge.Item{{Namespace: "team", Name: "w", Object: widget("team", "w", "blue")}}, Object: merged},
		{Item: merge.Item{Namespace: global, Name: "x", Object: widget(global, "x", "green")}, Scope: merge.ScopeGlobal},
	}
	widgets := schema.GroupResource{Group: group, Resource: "widgets"}
	tests := []struct {
		name     string
		view     *views.View
		wantKind schema.GroupVersionKind
	}{
		{name: "WithKind sets the view's kind", view: views.New(widgets, fakeSource{results: results}).WithKind(widgetKind), wantKind: widgetKind},
		{name: "without it, the source's", view: views.New(widgets, fakeSource{results: results}),
			wantKind: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			list, _, err := tt.view.List(context.Background(), "team")
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			colors := []string{"blue", "green"}
			overlays := []string{"team/w", ""}
			for i, obj := range list {
				u, ok := obj.(*unstructured.Unstructured)
				if !ok {
					t.Fatalf("item %d is a %T", i, obj)
				}
				if gvk := u.GroupVersionKind(); gvk != tt.wantKind {
					t.Errorf("%s: kind = %v, want %v", u.GetName(), gvk, tt.wantKind)
				}
				if c, _, _ := unstructured.NestedString(u.Object, "spec", "color"); c != colors[i] {
					t.Errorf("%s: color = %q, want %q", u.GetName(), c, colors[i])
				}
				if a := u.GetAnnotations()[v1alpha1.AnnotationOverlays]; a != overlays[i] {
					t.Errorf("%s: overlays = %q, want %q", u.GetName(), a, overlays[i])
				}
			}
		})
	}
	if base.GetAPIVersion() != "example.com/v1" || merged.GetAPIVersion() != "example.com/v1" {
		t.Error("WithKind changed a source or merged object")
	}
}

// TestObjectsAdd checks that watch event items of a resource added with an
// unstructured empty object carry its kind.
func TestObjectsAdd(t *testing.T) {
	t.Parallel()
	objs := views.NewObjects(newObject(), 0)
	objs.Add("widgets", func() runtime.Object {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(widgetKind)
		return u
	})
	src := widget(global, "w", "red")
	r := merge.Result{Item: merge.Item{Namespace: global, Name: "w", Object: src}, Scope: merge.ScopeGlobal}
	obj, err := objs.Item("widgets", "team", r, "5")
	if err != nil {
		t.Fatalf("Item: %v", err)
	}
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk != widgetKind {
		t.Errorf("event item kind = %v, want %v", gvk, widgetKind)
	}
	c, ok := obj.(runtime.CacheableObject)
	if !ok {
		t.Fatalf("event item is a %T, want a shared item", obj)
	}
	u, ok := c.GetObject().(*unstructured.Unstructured)
	if !ok || u.GroupVersionKind() != widgetKind || u.GetNamespace() != "team" || u.GetResourceVersion() != "5" {
		t.Errorf("event item = %#v, want team's widget at 5", c.GetObject())
	}
	if e, ok := objs.Empty("widgets").(*unstructured.Unstructured); !ok || e.GroupVersionKind() != widgetKind {
		t.Errorf("Empty(widgets) = %#v", objs.Empty("widgets"))
	}
	if src.GetAPIVersion() != "example.com/v1" {
		t.Error("Item changed the source")
	}
}

// TestItemCacheMerged checks that the shared items of one event tell apart
// results that differ in their merged object only.
func TestItemCacheMerged(t *testing.T) {
	t.Parallel()
	objs := views.NewObjects(newObject(), 0)
	r1, _ := overlaid()
	r2 := r1
	m2 := r1.Object.(*rbacv1.RoleBinding).DeepCopy()
	m2.Labels["tier"] = "silver"
	r2.Object = m2
	r3 := r1
	r3.Object = nil
	r3.Overlays = nil

	item := func(r merge.Result) runtime.Object {
		t.Helper()
		obj, err := objs.Item(rolebindings.Resource, "team", r, "9")
		if err != nil {
			t.Fatalf("Item: %v", err)
		}
		return obj
	}
	a, b, c, again := item(r1), item(r2), item(r3), item(r1)
	if again != a {
		t.Error("the same result of the same event is not shared")
	}
	tests := []struct {
		name string
		obj  runtime.Object
		tier string
	}{
		{name: "first merge", obj: a, tier: "gold"},
		{name: "another merge of the same base", obj: b, tier: "silver"},
		{name: "the base without overlays", obj: c, tier: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := meta.Accessor(viewObject(t, tt.obj))
			if err != nil {
				t.Fatal(err)
			}
			if got := m.GetLabels()["tier"]; got != tt.tier {
				t.Errorf("tier = %q, want %q", got, tt.tier)
			}
		})
	}
}
