package views_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// benchCluster holds namespaces tenants in orgs of 100 children each,
// globals global RoleBindings, 5 per org namespace and 2 local per tenant,
// fed to a synced mux as the informers would.
func benchCluster(b *testing.B, tenants, globals int) *views.View {
	b.Helper()
	m := watchmux.New(policy(), served, objects(), watchmux.Options{})
	ns := func(obj *corev1.Namespace) { m.OnNamespace(obj, false) }
	add := func(obj *rbacv1.RoleBinding) { m.OnSource(rolebindings.Resource, obj, false) }
	rb := func(ns, name string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), ResourceVersion: "1"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "org:viewers"}},
		}
	}
	ns(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: global}})
	for g := 0; g < globals; g++ {
		add(rb(global, fmt.Sprintf("global-%d", g)))
	}
	orgs := (tenants + 99) / 100
	for o := 0; o < orgs; o++ {
		org := fmt.Sprintf("org-%d", o)
		ns(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: org}})
		for i := 0; i < 5; i++ {
			add(rb(org, fmt.Sprintf("org-binding-%d", i)))
		}
	}
	for t := 0; t < tenants; t++ {
		name := fmt.Sprintf("team-%d", t)
		ns(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"implicit.dev/parent": fmt.Sprintf("org-%d", t/100)}}})
		add(rb(name, "local-0"))
		add(rb(name, "local-1"))
	}
	m.MarkSynced()
	return views.New(rolebindings, m)
}

// BenchmarkListOneNamespace lists one tenant's view: its cost must not grow
// with the number of namespaces, only with the items of its scopes.
func BenchmarkListOneNamespace(b *testing.B) {
	for _, tenants := range []int{1000, 10000} {
		for _, globals := range []int{10, 100} {
			b.Run(fmt.Sprintf("namespaces=%d/globals=%d", tenants, globals), func(b *testing.B) {
				v := benchCluster(b, tenants, globals)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					items, _, err := v.List(context.Background(), "team-42")
					if err != nil || len(items) != globals+7 {
						b.Fatalf("%d items, err %v", len(items), err)
					}
				}
			})
		}
	}
}

// BenchmarkGetOneItem gets one inherited item of one tenant's view.
func BenchmarkGetOneItem(b *testing.B) {
	for _, tenants := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("namespaces=%d/globals=100", tenants), func(b *testing.B) {
			v := benchCluster(b, tenants, 100)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := v.Get(context.Background(), "team-42", "global-7"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkListAllNamespaces lists every namespace's view (-A).
func BenchmarkListAllNamespaces(b *testing.B) {
	v := benchCluster(b, 1000, 10)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := v.List(context.Background(), ""); err != nil {
			b.Fatal(err)
		}
	}
}
