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
)

var (
	viewRoleBindings   = schema.GroupVersionResource{Group: "implicit.dev", Version: "v1alpha1", Resource: "rolebindings"}
	nativeRoleBindings = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
)

func globalName(i int) string { return fmt.Sprintf("global-%d", i) }

// parallel calls fn(i) for i in [0, n) on at most workers goroutines and
// prints "<what> i/n" about every 10%. The first error stops it.
func parallel(ctx context.Context, what string, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next, done atomic.Int64
	step := int64(max(1, n/10))
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
				if d := done.Add(1); what != "" && (d%step == 0 || d == int64(n)) {
					fmt.Printf("  %s %d/%d\n", what, d, n)
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
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "bench-user-" + name}},
	}
}

// setup creates the global namespace and its G RoleBindings, the orgs and
// the tenants, then waits until implicit-apiserver serves the last tenant's
// view with the G items.
func (b *bench) setup(ctx context.Context) error {
	start := time.Now()
	if err := b.createNamespace(ctx, globalNS, nil); err != nil {
		return err
	}
	nOrgs := orgCount(b.o.namespaces)
	b.orgs = make([]string, nOrgs)
	for i := range b.orgs {
		b.orgs[i] = fmt.Sprintf("org-%d", i)
	}
	b.tenants = make([]string, b.o.namespaces)
	for i := range b.tenants {
		b.tenants[i] = fmt.Sprintf("team-%d", i)
	}
	if err := parallel(ctx, "created orgs", nOrgs, workers, func(ctx context.Context, i int) error {
		return b.createNamespace(ctx, b.orgs[i], nil)
	}); err != nil {
		return err
	}
	if err := parallel(ctx, "created tenants", len(b.tenants), workers, func(ctx context.Context, i int) error {
		return b.createNamespace(ctx, b.tenants[i], map[string]string{labelParent: b.orgs[min(i/100, nOrgs-1)]})
	}); err != nil {
		return err
	}
	if err := parallel(ctx, "created global RoleBindings", b.o.globals, workers, func(ctx context.Context, i int) error {
		_, err := b.kube.RbacV1().RoleBindings(globalNS).Create(ctx, roleBinding(globalName(i)), metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}
	last := b.tenants[len(b.tenants)-1]
	var got int
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := b.dyn.Resource(viewRoleBindings).Namespace(last).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		got = len(l.Items)
		return got >= b.o.globals, nil
	})
	if err != nil {
		return fmt.Errorf("view of %s holds %d items, want %d: %w", last, got, b.o.globals, err)
	}
	fmt.Printf("setup: %d namespaces and %d global RoleBindings created, served by the views, in %s\n",
		1+nOrgs+len(b.tenants), b.o.globals, time.Since(start).Round(time.Millisecond))
	return nil
}
