package views_test

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// hierarchy returns the namespaces of the test cluster:
//
//	implicit-global   the global sources
//	org               excludes rolebindings/excluded-by-org
//	└─ dept
//	   ├─ team-a      excludes rolebindings/excluded-by-team and NetworkPolicies/*
//	   └─ team-b
//	team-c            no parent, excludes rolebindings/* (a locked item survives)
//	└─ team-c-kid
//	opted-out         implicit.dev/inherit: "false"
//	kube-system       excluded by policy
//	cyc-a <-> cyc-b   a parent cycle
//	orphan            parent "gone", which does not exist
//	└─ below-orphan
//	under-system      parent kube-system, which is no tenant and so no parent
//	under-opted       parent opted-out, likewise
func hierarchy() []*corev1.Namespace {
	return []*corev1.Namespace{
		namespace(global),
		namespace("org", exclude("rolebindings/excluded-by-org")),
		namespace("dept", parent("org")),
		namespace("team-a", parent("dept"), exclude(" rolebindings/excluded-by-team , NetworkPolicies/*")),
		namespace("team-b", parent("dept")),
		namespace("team-c", exclude("rolebindings/*")),
		namespace("team-c-kid", parent("team-c")),
		namespace("opted-out", noInherit),
		namespace("kube-system"),
		namespace("cyc-a", parent("cyc-b")),
		namespace("cyc-b", parent("cyc-a")),
		namespace("orphan", parent("gone")),
		namespace("below-orphan", parent("orphan")),
		namespace("under-system", parent("kube-system")),
		namespace("under-opted", parent("opted-out")),
	}
}

func worldRoleBindings() []runtime.Object {
	return []runtime.Object{
		roleBinding(global, "org-viewers"),
		roleBinding(global, "shadowable"),
		roleBinding(global, "locked-admins", locked),
		roleBinding(global, "excluded-by-team"),
		roleBinding(global, "excluded-by-org"),
		roleBinding(global, "parent-override"),

		roleBinding("org", "org-rb"),
		roleBinding("org", "parent-override"),
		roleBinding("org", "near-wins"),

		roleBinding("dept", "dept-rb"),
		roleBinding("dept", "near-wins"),
		roleBinding("dept", "dept-locked", locked),

		roleBinding("team-a", "shadowable"),
		roleBinding("team-a", "locked-admins"),
		roleBinding("team-a", "local-rb"),
		roleBinding("team-a", "dept-locked"),

		roleBinding("team-c", "team-c-rb"),
		roleBinding("team-c-kid", "kid-rb"),

		roleBinding("opted-out", "opted-rb"),
		roleBinding("kube-system", "system-rb"),

		roleBinding("cyc-a", "cyc-a-rb"),
		roleBinding("cyc-b", "cyc-b-rb"),

		roleBinding("orphan", "orphan-rb"),
		roleBinding("below-orphan", "below-rb"),
		roleBinding("under-system", "under-system-rb"),
	}
}

// wantRoleBindings is every namespace's rolebindings view, as summaries.
var wantRoleBindings = map[string][]string{
	"team-a": {
		"dept-locked parent dept",
		"dept-rb parent dept",
		"local-rb local team-a",
		"locked-admins global implicit-global",
		"near-wins parent dept",
		"org-rb parent org",
		"org-viewers global implicit-global",
		"parent-override parent org",
		"shadowable local team-a",
	},
	"team-b": {
		"dept-locked parent dept",
		"dept-rb parent dept",
		"excluded-by-team global implicit-global",
		"locked-admins global implicit-global",
		"near-wins parent dept",
		"org-rb parent org",
		"org-viewers global implicit-global",
		"parent-override parent org",
		"shadowable global implicit-global",
	},
	"dept": {
		"dept-locked local dept",
		"dept-rb local dept",
		"excluded-by-team global implicit-global",
		"locked-admins global implicit-global",
		"near-wins local dept",
		"org-rb parent org",
		"org-viewers global implicit-global",
		"parent-override parent org",
		"shadowable global implicit-global",
	},
	"org": {
		"excluded-by-team global implicit-global",
		"locked-admins global implicit-global",
		"near-wins local org",
		"org-rb local org",
		"org-viewers global implicit-global",
		"parent-override local org",
		"shadowable global implicit-global",
	},
	"team-c": {
		"locked-admins global implicit-global",
		"team-c-rb local team-c",
	},
	"team-c-kid": {
		"kid-rb local team-c-kid",
		"locked-admins global implicit-global",
		"team-c-rb parent team-c",
	},
	global: {
		"excluded-by-org local implicit-global",
		"excluded-by-team local implicit-global",
		"locked-admins local implicit-global",
		"org-viewers local implicit-global",
		"parent-override local implicit-global",
		"shadowable local implicit-global",
	},
	"opted-out":   {"opted-rb local opted-out"},
	"kube-system": {"system-rb local kube-system"},
	"cyc-a": {
		"cyc-a-rb local cyc-a",
		"excluded-by-org global implicit-global",
		"excluded-by-team global implicit-global",
		"locked-admins global implicit-global",
		"org-viewers global implicit-global",
		"parent-override global implicit-global",
		"shadowable global implicit-global",
	},
	"cyc-b": {
		"cyc-b-rb local cyc-b",
		"excluded-by-org global implicit-global",
		"excluded-by-team global implicit-global",
		"locked-admins global implicit-global",
		"org-viewers global implicit-global",
		"parent-override global implicit-global",
		"shadowable global implicit-global",
	},
	"orphan": {
		"excluded-by-org global implicit-global",
		"excluded-by-team global implicit-global",
		"locked-admins global implicit-global",
		"org-viewers global implicit-global",
		"orphan-rb local orphan",
		"parent-override global implicit-global",
		"shadowable global implicit-global",
	},
	"under-system": {
		"excluded-by-org global implicit-global",
		"excluded-by-team global implicit-global",
		"locked-admins global implicit-global",
		"org-viewers global implicit-global",
		"parent-override global implicit-global",
		"shadowable global implicit-global",
		"under-system-rb local under-system",
	},
	"under-opted": {
		"excluded-by-org global implicit-global",
		"excluded-by-team global implicit-global",
		"locked-admins global implicit-global",
		"org-viewers global implicit-global",
		"parent-override global implicit-global",
		"shadowable global implicit-global",
	},
	"below-orphan": {
		"below-rb local below-orphan",
		"excluded-by-org global implicit-global",
		"excluded-by-team global implicit-global",
		"locked-admins global implicit-global",
		"org-viewers global implicit-global",
		"orphan-rb parent orphan",
		"parent-override global implicit-global",
		"shadowable global implicit-global",
	},
}

// rbWorld returns the rolebindings view of the test cluster and the mux it reads.
func rbWorld() (*views.View, *watchmux.Mux) {
	return newView(rolebindings, hierarchy(), worldRoleBindings()...)
}

func TestViewList(t *testing.T) {
	t.Parallel()
	view, mux := rbWorld()
	rv := currentRV(t, mux)
	tests := []struct {
		name      string
		namespace string
		want      []string
	}{
		{name: "tenant inherits global, parent and grandparent; local shadows; lock holds; own exclusion", namespace: "team-a", want: wantRoleBindings["team-a"]},
		{name: "sibling is untouched by team-a's exclusion and shadows", namespace: "team-b", want: wantRoleBindings["team-b"]},
		{name: "middle of the hierarchy: local wins over its parent, ancestor's exclusion inherited", namespace: "dept", want: wantRoleBindings["dept"]},
		{name: "root tenant: exclusion removes a global item from its own view", namespace: "org", want: wantRoleBindings["org"]},
		{name: "wildcard exclusion removes every inherited item but a locked one", namespace: "team-c", want: wantRoleBindings["team-c"]},
		{name: "descendant inherits an ancestor's wildcard exclusion", namespace: "team-c-kid", want: wantRoleBindings["team-c-kid"]},
		{name: "global namespace is no tenant: its own items, scope local", namespace: global, want: wantRoleBindings[global]},
		{name: "inherit false: local items only", namespace: "opted-out", want: wantRoleBindings["opted-out"]},
		{name: "excluded namespace: local items only", namespace: "kube-system", want: wantRoleBindings["kube-system"]},
		{name: "cycle member inherits no parent but still global", namespace: "cyc-a", want: wantRoleBindings["cyc-a"]},
		{name: "other cycle member likewise", namespace: "cyc-b", want: wantRoleBindings["cyc-b"]},
		{name: "missing parent: global and local only", namespace: "orphan", want: wantRoleBindings["orphan"]},
		{name: "below a missing parent: ancestors up to the break, and global", namespace: "below-orphan", want: wantRoleBindings["below-orphan"]},
		{name: "excluded namespace as parent: not inherited from, global still is", namespace: "under-system", want: wantRoleBindings["under-system"]},
		{name: "inherit-false namespace as parent: not inherited from", namespace: "under-opted", want: wantRoleBindings["under-opted"]},
		{name: "nonexistent namespace: empty", namespace: "no-such-namespace", want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, listRV, err := view.List(context.Background(), tt.namespace)
			if err != nil {
				t.Fatalf("List(%q): %v", tt.namespace, err)
			}
			if s := summaries(t, got); !reflect.DeepEqual(s, tt.want) {
				t.Errorf("List(%q) =\n  %s\nwant\n  %s", tt.namespace, strings.Join(s, "\n  "), strings.Join(tt.want, "\n  "))
			}
			if listRV != rv {
				t.Errorf("List(%q) resourceVersion = %q, want the mux's %q", tt.namespace, listRV, rv)
			}
			for _, obj := range got {
				m, _ := meta.Accessor(obj)
				if m.GetNamespace() != tt.namespace {
					t.Errorf("item %s: metadata.namespace = %q, want the viewing namespace %q", m.GetName(), m.GetNamespace(), tt.namespace)
				}
				if m.GetResourceVersion() != listRV {
					t.Errorf("item %s: resourceVersion = %q, want the list's %q", m.GetName(), m.GetResourceVersion(), listRV)
				}
			}
		})
	}
}

func TestViewListAllNamespaces(t *testing.T) {
	t.Parallel()
	view, mux := rbWorld()
	got, rv, err := view.List(context.Background(), "")
	if err != nil {
		t.Fatalf(`List(""): %v`, err)
	}
	if want := currentRV(t, mux); rv != want {
		t.Errorf(`List("") resourceVersion = %q, want the mux's %q`, rv, want)
	}

	var names []string
	for _, ns := range hierarchy() {
		names = append(names, ns.Name)
	}
	sort.Strings(names)
	var want []string
	for _, ns := range names {
		for _, s := range wantRoleBindings[ns] {
			want = append(want, ns+": "+s)
		}
	}
	var have []string
	for _, obj := range got {
		m, _ := meta.Accessor(obj)
		have = append(have, m.GetNamespace()+": "+summary(t, obj))
	}
	if !reflect.DeepEqual(have, want) {
		t.Errorf(`List("") =
  %s
want (by namespace, then name)
  %s`, strings.Join(have, "\n  "), strings.Join(want, "\n  "))
	}
	if !sort.SliceIsSorted(got, func(i, j int) bool {
		a, _ := meta.Accessor(got[i])
		b, _ := meta.Accessor(got[j])
		if a.GetNamespace() != b.GetNamespace() {
			return a.GetNamespace() < b.GetNamespace()
		}
		return a.GetName() < b.GetName()
	}) {
		t.Error(`List("") is not sorted by namespace, then name`)
	}
}

func TestViewGet(t *testing.T) {
	t.Parallel()
	view, mux := rbWorld()
	rv := currentRV(t, mux)
	tests := []struct {
		name      string
		namespace string
		item      string
		// want is the item's summary; "" means NotFound.
		want string
	}{
		{name: "global item inherited", namespace: "team-a", item: "org-viewers", want: "org-viewers global implicit-global"},
		{name: "grandparent item", namespace: "team-a", item: "org-rb", want: "org-rb parent org"},
		{name: "nearest parent wins over grandparent", namespace: "team-a", item: "near-wins", want: "near-wins parent dept"},
		{name: "parent wins over global", namespace: "team-a", item: "parent-override", want: "parent-override parent org"},
		{name: "local shadows global", namespace: "team-a", item: "shadowable", want: "shadowable local team-a"},
		{name: "locked global item is not shadowed", namespace: "team-a", item: "locked-admins", want: "locked-admins global implicit-global"},
		{name: "locked parent item is not shadowed", namespace: "team-a", item: "dept-locked", want: "dept-locked parent dept"},
		{name: "own exclusion", namespace: "team-a", item: "excluded-by-team"},
		{name: "ancestor's exclusion", namespace: "team-a", item: "excluded-by-org"},
		{name: "sibling's exclusion does not apply", namespace: "team-b", item: "excluded-by-team", want: "excluded-by-team global implicit-global"},
		{name: "sibling's local item is not visible", namespace: "team-b", item: "local-rb"},
		{name: "wildcard exclusion on an ancestor", namespace: "team-c-kid", item: "org-viewers"},
		{name: "wildcard exclusion keeps the ancestor's own items", namespace: "team-c-kid", item: "team-c-rb", want: "team-c-rb parent team-c"},
		{name: "inherit false sees no global item", namespace: "opted-out", item: "org-viewers"},
		{name: "inherit false sees its own", namespace: "opted-out", item: "opted-rb", want: "opted-rb local opted-out"},
		{name: "excluded namespace sees no global item", namespace: "kube-system", item: "org-viewers"},
		{name: "global namespace sees its items as local", namespace: global, item: "org-viewers", want: "org-viewers local implicit-global"},
		{name: "cycle member does not inherit the other member", namespace: "cyc-a", item: "cyc-b-rb"},
		{name: "cycle member still inherits global", namespace: "cyc-a", item: "org-viewers", want: "org-viewers global implicit-global"},
		{name: "missing parent still inherits global", namespace: "orphan", item: "org-viewers", want: "org-viewers global implicit-global"},
		{name: "excluded namespace as parent passes nothing down", namespace: "under-system", item: "system-rb"},
		{name: "inherit-false namespace as parent passes nothing down", namespace: "under-opted", item: "opted-rb"},
		{name: "nonexistent namespace", namespace: "no-such-namespace", item: "org-viewers"},
		{name: "nonexistent item", namespace: "team-a", item: "no-such-item"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := view.Get(context.Background(), tt.namespace, tt.item)
			if tt.want == "" {
				if !apierrors.IsNotFound(err) {
					t.Fatalf("Get(%q, %q) = %v, %v; want NotFound", tt.namespace, tt.item, got, err)
				}
				details := err.(apierrors.APIStatus).Status().Details
				if details == nil || details.Group != group || details.Kind != "rolebindings" || details.Name != tt.item {
					t.Errorf("NotFound details = %+v, want group %q, kind rolebindings, name %q", details, group, tt.item)
				}
				return
			}
			if err != nil {
				t.Fatalf("Get(%q, %q): %v", tt.namespace, tt.item, err)
			}
			if s := summary(t, got); s != tt.want {
				t.Errorf("Get(%q, %q) = %q, want %q", tt.namespace, tt.item, s, tt.want)
			}
			m, _ := meta.Accessor(got)
			if m.GetNamespace() != tt.namespace {
				t.Errorf("metadata.namespace = %q, want %q", m.GetNamespace(), tt.namespace)
			}
			if m.GetResourceVersion() != rv {
				t.Errorf("resourceVersion = %q, want the mux's %q", m.GetResourceVersion(), rv)
			}
		})
	}
}

// TestViewGetAgreesWithList checks that Get returns exactly the item List
// shows, for every item of every namespace.
func TestViewGetAgreesWithList(t *testing.T) {
	t.Parallel()
	view, _ := rbWorld()
	for _, ns := range hierarchy() {
		t.Run(ns.Name, func(t *testing.T) {
			t.Parallel()
			list, _, err := view.List(context.Background(), ns.Name)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			for _, want := range list {
				m, _ := meta.Accessor(want)
				got, err := view.Get(context.Background(), ns.Name, m.GetName())
				if err != nil {
					t.Errorf("Get(%q): %v", m.GetName(), err)
					continue
				}
				if !apiequality.Semantic.DeepEqual(got, want) {
					t.Errorf("Get(%q) = %#v\nwant the List item %#v", m.GetName(), got, want)
				}
			}
		})
	}
}

func TestViewConflict(t *testing.T) {
	t.Parallel()
	view, _ := rbWorld()
	tests := []struct {
		name      string
		namespace string
		item      string
		// want are substrings of implicit.dev/conflict; none means no annotation.
		want []string
	}{
		{name: "local shadow of a locked global item", namespace: "team-a", item: "locked-admins", want: []string{"team-a/locked-admins", "local", "implicit-global/locked-admins"}},
		{name: "exclusion of a locked item", namespace: "team-c", item: "locked-admins", want: []string{"rolebindings/*", "team-c", "implicit-global/locked-admins"}},
		{name: "ancestor's blocked exclusion is reported to descendants", namespace: "team-c-kid", item: "locked-admins", want: []string{"rolebindings/*", "team-c"}},
		{name: "local shadow of a locked parent item", namespace: "team-a", item: "dept-locked", want: []string{"team-a/dept-locked", "dept/dept-locked"}},
		{name: "no shadow attempted", namespace: "team-b", item: "locked-admins"},
		{name: "locked item in its own namespace", namespace: global, item: "locked-admins"},
		{name: "unlocked item shadowed without conflict", namespace: "team-a", item: "shadowable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, get := range []struct {
				how string
				fn  func() (runtime.Object, error)
			}{
				{"Get", func() (runtime.Object, error) { return view.Get(context.Background(), tt.namespace, tt.item) }},
				{"List", func() (runtime.Object, error) { return find(view, tt.namespace, tt.item) }},
			} {
				obj, err := get.fn()
				if err != nil {
					t.Fatalf("%s: %v", get.how, err)
				}
				m, _ := meta.Accessor(obj)
				conflict, ok := m.GetAnnotations()[v1alpha1.AnnotationConflict]
				if len(tt.want) == 0 {
					if ok {
						t.Errorf("%s: unexpected %s: %q", get.how, v1alpha1.AnnotationConflict, conflict)
					}
					continue
				}
				if !ok {
					t.Fatalf("%s: no %s annotation, want one naming %q", get.how, v1alpha1.AnnotationConflict, tt.want)
				}
				for _, w := range tt.want {
					if !strings.Contains(conflict, w) {
						t.Errorf("%s: %s = %q, want it to name %q", get.how, v1alpha1.AnnotationConflict, conflict, w)
					}
				}
			}
		})
	}
}

// find returns item from namespace's List.
func find(view *views.View, namespace, item string) (runtime.Object, error) {
	list, _, err := view.List(context.Background(), namespace)
	if err != nil {
		return nil, err
	}
	for _, obj := range list {
		if m, _ := meta.Accessor(obj); m.GetName() == item {
			return obj, nil
		}
	}
	return nil, apierrors.NewNotFound(rolebindings, item)
}

// TestViewOtherKinds checks that exclusions name a resource, and that Roles
// and NetworkPolicies merge like RoleBindings.
func TestViewOtherKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		resource  schema.GroupResource
		objects   []runtime.Object
		namespace string
		want      []string
	}{
		{
			name:     "roles: a rolebindings exclusion does not remove a role of the same name",
			resource: roles,
			objects: []runtime.Object{
				role(global, "excluded-by-team"),
				role(global, "excluded-by-org"),
				role("dept", "dept-role"),
				role("team-a", "local-role"),
			},
			namespace: "team-a",
			want: []string{
				"dept-role parent dept",
				"excluded-by-org global implicit-global",
				"excluded-by-team global implicit-global",
				"local-role local team-a",
			},
		},
		{
			name:     "networkpolicies: a mixed-case wildcard exclusion removes every inherited policy, not local ones",
			resource: networkpolicies,
			objects: []runtime.Object{
				networkPolicy(global, "default-deny"),
				networkPolicy("org", "org-allow"),
				networkPolicy("team-a", "local-allow"),
			},
			namespace: "team-a",
			want:      []string{"local-allow local team-a"},
		},
		{
			name:     "networkpolicies: the sibling inherits them",
			resource: networkpolicies,
			objects: []runtime.Object{
				networkPolicy(global, "default-deny"),
				networkPolicy("org", "org-allow"),
				networkPolicy("team-a", "local-allow"),
			},
			namespace: "team-b",
			want:      []string{"default-deny global implicit-global", "org-allow parent org"},
		},
		{
			name:     "networkpolicies: locked global policy survives the wildcard exclusion",
			resource: networkpolicies,
			objects: []runtime.Object{
				networkPolicy(global, "default-deny", locked),
				networkPolicy(global, "other"),
			},
			namespace: "team-a",
			want:      []string{"default-deny global implicit-global"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			view, _ := newView(tt.resource, hierarchy(), tt.objects...)
			got, _, err := view.List(context.Background(), tt.namespace)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			if s := summaries(t, got); !reflect.DeepEqual(s, tt.want) {
				t.Errorf("List(%q) = %q, want %q", tt.namespace, s, tt.want)
			}
		})
	}
}

// TestViewGlobalNamespaceNotInCluster checks that tenants inherit global
// items even when the global namespace is not among the local namespaces,
// as with a hub cluster.
func TestViewGlobalNamespaceNotInCluster(t *testing.T) {
	t.Parallel()
	view, _ := newView(rolebindings, []*corev1.Namespace{namespace("team")},
		roleBinding(global, "org-viewers"), roleBinding("team", "local"))
	got, _, err := view.List(context.Background(), "team")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	want := []string{"local local team", "org-viewers global implicit-global"}
	if s := summaries(t, got); !reflect.DeepEqual(s, want) {
		t.Errorf("List(team) = %q, want %q", s, want)
	}
}

// TestViewListNamed: listing one name across namespaces merges that name
// only and gives exactly List's items of that name.
func TestViewListNamed(t *testing.T) {
	t.Parallel()
	view, _ := rbWorld()
	all, _, err := view.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, obj := range all {
		m, _ := meta.Accessor(obj)
		names[m.GetName()] = true
	}
	if len(names) < 2 {
		t.Fatalf("the test world has %d names, want several", len(names))
	}
	for name := range names {
		var want []string
		for _, obj := range all {
			if m, _ := meta.Accessor(obj); m.GetName() == name {
				want = append(want, m.GetNamespace()+": "+summary(t, obj))
			}
		}
		got, _, err := view.ListNamed(context.Background(), "", name)
		if err != nil {
			t.Fatal(err)
		}
		var have []string
		for _, obj := range got {
			m, _ := meta.Accessor(obj)
			have = append(have, m.GetNamespace()+": "+summary(t, obj))
		}
		if !reflect.DeepEqual(have, want) {
			t.Errorf("ListNamed(%q) =\n  %v\nwant List's items of that name\n  %v", name, have, want)
		}
	}
}
