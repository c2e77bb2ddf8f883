package main

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	fleetv1alpha1 "github.com/implicit-dev/implicit-apiserver/pkg/apis/fleet/v1alpha1"
)

// run starts simulated member m: its informers, its registration's watch
// and its reports, until ctx ends.
func (s *simulated) run(ctx context.Context, m *simMember, cfg *rest.Config, fo fleetOptions) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	changed := make(chan struct{}, 1)
	see := func(obj any) {
		acc, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		rv, err := strconv.ParseUint(acc.GetResourceVersion(), 10, 64)
		if err != nil {
			return
		}
		m.seen.LoadOrStore(acc.GetResourceVersion(), time.Now())
		for {
			cur := m.served.Load()
			if rv <= cur || m.served.CompareAndSwap(cur, rv) {
				break
			}
		}
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	handler := cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, obj any) { see(obj) }, DeleteFunc: see}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(globalNS))
	rbs := factory.Rbac().V1().RoleBindings().Informer()
	for _, inf := range []cache.SharedIndexInformer{rbs, factory.Rbac().V1().Roles().Informer(), factory.Networking().V1().NetworkPolicies().Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
	}
	registration := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, "", func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + m.name
	}).ForResource(fleetv1alpha1.GroupVersionResource).Informer()
	factory.Start(ctx.Done())
	s.wg.Go(func() { registration.RunWithContext(ctx) })
	s.wg.Go(func() {
		<-ctx.Done()
		factory.Shutdown()
	})
	s.wg.Go(func() { m.report(ctx, dyn, rbs, fo, changed) })
	return nil
}

// report writes m's MemberCluster status: at most every 2 s after a change,
// and every 30 s, as a member's reporter does.
func (m *simMember) report(ctx context.Context, dyn dynamic.Interface, rbs cache.SharedIndexInformer, fo fleetOptions, changed <-chan struct{}) {
	heartbeat := time.NewTicker(30 * time.Second)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			select { // debounce: what else comes within 2 s
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
		case <-heartbeat.C:
		}
		if !rbs.HasSynced() {
			continue
		}
		st := fleetv1alpha1.MemberClusterStatus{
			ReportTime: &metav1.Time{Time: time.Now()}, ServedRevision: strconv.FormatUint(m.served.Load(), 10),
			Namespaces: int32(fo.tenants),
		}
		for _, o := range rbs.GetStore().List() {
			if acc, ok := o.(metav1.Object); ok {
				st.Sources = append(st.Sources, fleetv1alpha1.SourceReport{Resource: "rolebindings.rbac.authorization.k8s.io",
					Name: acc.GetName(), ResourceVersion: acc.GetResourceVersion(), Namespaces: int32(fo.tenants)})
			}
		}
		body, _ := json.Marshal(map[string]any{"status": st})
		_, _ = dyn.Resource(fleetv1alpha1.GroupVersionResource).Patch(ctx, m.name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	}
}
