package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	workers     = 16
	labelParent = "implicit.dev/parent"
	labelBench  = "bench.implicit.dev/run"
	// nativeNS holds as many real RoleBindings as a tenant's view holds
	// inherited ones: the native side of the one-namespace list.
	nativeNS = "bench-native"
	// readerRole is the ClusterRole every bench RoleBinding grants. Not
	// "view": without kube-controller-manager, the aggregated ClusterRoles
	// have no rules.
	readerRole = "bench-reader"
)

var (
	viewRoleBindings   = schema.GroupVersionResource{Group: "implicit.dev", Version: "v1alpha1", Resource: "rolebindings"}
	nativeRoleBindings = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
)

func globalName(i int) string { return fmt.Sprintf("global-%d", i) }

// parallel calls fn(i) for i in [0, n) on at most workers goroutines. The
// first error stops it.
func parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, int(i)); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

func (b *bench) createNamespace(ctx context.Context, name string, labels map[string]string) error {
	_, err := b.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	return err
}

func roleBinding(name string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labelBench: "0"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: readerRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: benchSubject(name)}},
	}
}

// setup creates the global namespace, the orgs, the tenants and the native
// namespace (no tenant), then the first G global RoleBindings.
func (b *bench) setup(ctx context.Context) error {
	start := time.Now()
	if _, err := b.kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: readerRole},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := b.createNamespace(ctx, globalNS, nil); err != nil {
		return err
	}
	if err := b.createNamespace(ctx, nativeNS, map[string]string{"implicit.dev/inherit": "false"}); err != nil {
		return err
	}
	nOrgs := orgCount(b.n)
	b.orgs = make([]string, nOrgs)
	for i := range b.orgs {
		b.orgs[i] = fmt.Sprintf("org-%d", i)
	}
	b.tenants = make([]string, b.n)
	for i := range b.tenants {
		b.tenants[i] = fmt.Sprintf("team-%d", i)
	}
	if err := parallel(ctx, nOrgs, workers, func(ctx context.Context, i int) error {
		return b.createNamespace(ctx, b.orgs[i], nil)
	}); err != nil {
		return err
	}
	b.prog.show("creating %d tenant namespaces N=%d", b.n, b.n)
	if err := parallel(ctx, len(b.tenants), workers, func(ctx context.Context, i int) error {
		return b.createNamespace(ctx, b.tenants[i], map[string]string{labelParent: b.orgs[min(i/100, nOrgs-1)]})
	}); err != nil {
		return err
	}
	fmt.Printf("setup: %d namespaces created in %s\n", 2+nOrgs+len(b.tenants), time.Since(start).Round(time.Millisecond))
	return b.addGlobals(ctx, b.o.globals[0])
}

// addGlobals creates global RoleBindings (and their twins in the native
// namespace) up to g, then waits until implicit-apiserver serves the last
// tenant's view with g items.
func (b *bench) addGlobals(ctx context.Context, g int) error {
	start := time.Now()
	from := b.globals
	if err := parallel(ctx, g-from, workers, func(ctx context.Context, i int) error {
		for _, ns := range []string{globalNS, nativeNS} {
			if _, err := b.kube.RbacV1().RoleBindings(ns).Create(ctx, roleBinding(globalName(from+i)), metav1.CreateOptions{}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	b.globals = g
	last := b.tenants[len(b.tenants)-1]
	var got int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := b.dyn.Resource(viewRoleBindings).Namespace(last).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		got = len(l.Items)
		return got >= g, nil
	})
	if err != nil {
		return fmt.Errorf("view of %s holds %d items, want %d: %w", last, got, g, err)
	}
	fmt.Printf("G=%d global RoleBindings (%d new) served by the views in %s\n", g, g-from, time.Since(start).Round(time.Millisecond))
	return nil
}
