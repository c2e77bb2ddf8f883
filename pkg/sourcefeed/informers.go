package sourcefeed

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// DefaultProgress is how often each tracked source is read consistently
// (one item) and its informer's watch renewed, by default
// (--source-progress-interval): the read moves
// kube-apiserver's watch cache to etcd's current revision, and the bookmark
// the cache sends before the renewed watch's deadline carries it, so a quiet
// source's part stays within about two intervals of etcd's revision.
// Without them a quiet source's revision moves only with etcd's progress
// notifications (10 minutes by default), and a version could name a
// revision compacted since (kube-apiserver compacts every 5 minutes by
// default; the interval must stay well below its --etcd-compaction-interval)
// while its state is current: another replica, which must list at that
// revision, would answer 410.
const DefaultProgress = 10 * time.Second

// trackedKinds are the built-in kinds whose informers list and watch
// through a Tracker, with their list and watch through the typed client.
var trackedKinds = []struct {
	gvr     schema.GroupVersionResource
	example runtime.Object
	list    func(c kubernetes.Interface, ns string) func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch   func(c kubernetes.Interface, ns string) func(context.Context, metav1.ListOptions) (watch.Interface, error)
}{
	{
		gvr: rbacv1.SchemeGroupVersion.WithResource("rolebindings"), example: &rbacv1.RoleBinding{},
		list: func(c kubernetes.Interface, ns string) func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.RbacV1().RoleBindings(ns).List(ctx, o)
			}
		},
		watch: func(c kubernetes.Interface, ns string) func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return c.RbacV1().RoleBindings(ns).Watch(ctx, o)
			}
		},
	},
	{
		gvr: rbacv1.SchemeGroupVersion.WithResource("roles"), example: &rbacv1.Role{},
		list: func(c kubernetes.Interface, ns string) func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.RbacV1().Roles(ns).List(ctx, o)
			}
		},
		watch: func(c kubernetes.Interface, ns string) func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return c.RbacV1().Roles(ns).Watch(ctx, o)
			}
		},
	},
	{
		gvr: networkingv1.SchemeGroupVersion.WithResource("networkpolicies"), example: &networkingv1.NetworkPolicy{},
		list: func(c kubernetes.Interface, ns string) func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return c.NetworkingV1().NetworkPolicies(ns).List(ctx, o)
			}
		},
		watch: func(c kubernetes.Interface, ns string) func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			return func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return c.NetworkingV1().NetworkPolicies(ns).Watch(ctx, o)
			}
		},
	},
}

// Stream is an informer that lists and watches through a Tracker: the mux
// takes complete states from it.
type Stream struct {
	Tracker  *Tracker
	Informer cache.SharedIndexInformer
}

// Tracked are the Trackers registered in one informer factory.
type Tracked struct {
	// Namespaces is the namespaces' stream; nil for a factory of one
	// namespace (the hub's).
	Namespaces *Stream
	// Kinds are the built-in kinds' streams.
	Kinds map[schema.GroupVersionResource]Stream
}

// Trackers lists every Tracker.
func (t Tracked) Trackers() []*Tracker {
	var out []*Tracker
	if t.Namespaces != nil {
		out = append(out, t.Namespaces.Tracker)
	}
	for _, s := range t.Kinds {
		out = append(out, s.Tracker)
	}
	return out
}

// TrackInformers registers in factory, for the namespaces (when namespace
// is "") and the built-in kinds, informers that list and watch through a
// Tracker, before anything asks the factory for them: the factory then
// shares them with every other reader, so there is still one upstream watch
// per kind. (Its Informer() hands out a typed wrapper, a new one each call:
// the mux is fed from the shared informer returned here.) A kind whose
// informer was made before is left untracked, and fed as before.
func TrackInformers(factory informers.SharedInformerFactory, client kubernetes.Interface, namespace string, progress time.Duration) Tracked {
	out := Tracked{Kinds: map[schema.GroupVersionResource]Stream{}}
	if client == nil || factory == nil {
		return out
	}
	register := func(name string, example runtime.Object, lw *cache.ListWatch) Stream {
		tr := New(name, cache.ToListWatcherWithWatchListSemantics(lw, client))
		tr.SetProgress(progress)
		var built cache.SharedIndexInformer
		got := factory.InformerFor(example, func(kubernetes.Interface, time.Duration) cache.SharedIndexInformer {
			// Resync 0, whatever the factory's default: a resync hands
			// every handler every object again, deliveries the Tracker
			// does not count.
			built = cache.NewSharedIndexInformer(tr.ListerWatcher(), example, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			return built
		})
		if got != built {
			klog.InfoS("An informer was made before its source could be tracked: its versions name the last revision delivered", "resource", name)
			return Stream{}
		}
		return Stream{Tracker: tr, Informer: got}
	}
	if namespace == "" {
		s := register("namespaces", &corev1.Namespace{}, &cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return client.CoreV1().Namespaces().List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return client.CoreV1().Namespaces().Watch(ctx, o)
			},
		})
		if s.Tracker != nil {
			out.Namespaces = &s
		}
	}
	for _, k := range trackedKinds {
		s := register(k.gvr.Resource, k.example, &cache.ListWatch{
			ListWithContextFunc:  k.list(client, namespace),
			WatchFuncWithContext: k.watch(client, namespace),
		})
		if s.Tracker != nil {
			out.Kinds[k.gvr] = s
		}
	}
	return out
}
