package kindcontroller

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/implicit-dev/implicit-apiserver/pkg/sourcefeed"
)

// trackedInformers are the configured kinds' informers, one per resource,
// each listing and watching through a sourcefeed.Tracker as the built-in
// kinds' do (sourcefeed.TrackInformers), so a configured kind's part of a
// version names a state etcd held too, and keeps up with etcd while the
// kind is quiet: the Tracker's watches are renewed and its source read
// consistently every progress interval. It stands where client-go's
// dynamic informer factory stood, which builds its informers on the
// dynamic client itself and so can't be tracked.
//
// Concurrency: For and Start may be called from any goroutine; an informer
// made after Start runs once Start is called again (as the factory's).
// Every goroutine ends when the context given to Start ends; Shutdown waits
// for them.
type trackedInformers struct {
	client    dynamic.Interface
	namespace string
	progress  time.Duration

	mu      sync.Mutex
	streams map[schema.GroupVersionResource]sourcefeed.Stream
	started map[schema.GroupVersionResource]bool
	wg      sync.WaitGroup
}

// newTrackedInformers reads resources through client, in namespace ("" for
// all), renewing watches and reading for progress every progress (0: never).
func newTrackedInformers(client dynamic.Interface, namespace string, progress time.Duration) *trackedInformers {
	return &trackedInformers{
		client: client, namespace: namespace, progress: progress,
		streams: map[schema.GroupVersionResource]sourcefeed.Stream{},
		started: map[schema.GroupVersionResource]bool{},
	}
}

// For returns gvr's informer and its Tracker, made on the first call.
func (t *trackedInformers) For(gvr schema.GroupVersionResource) sourcefeed.Stream {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.streams[gvr]; ok {
		return s
	}
	client := t.client.Resource(gvr).Namespace(t.namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(ctx, o)
		},
	}
	tr := sourcefeed.New(gvr.Resource, cache.ToListWatcherWithWatchListSemantics(lw, t.client))
	tr.SetProgress(t.progress)
	// Resync 0: a resync hands every handler every object again,
	// deliveries the Tracker does not count.
	inf := cache.NewSharedIndexInformer(tr.ListerWatcher(), &unstructured.Unstructured{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	s := sourcefeed.Stream{Tracker: tr, Informer: inf}
	t.streams[gvr] = s
	return s
}

// Start runs every informer not running yet, and its progress reads, until
// ctx ends.
func (t *trackedInformers) Start(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for gvr, s := range t.streams {
		if t.started[gvr] {
			continue
		}
		t.started[gvr] = true
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			s.Informer.RunWithContext(ctx)
		}()
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			sourcefeed.RunProgress(ctx, []*sourcefeed.Tracker{s.Tracker}, t.progress)
		}()
	}
}

// Shutdown waits for the goroutines of Start, once its context ended.
func (t *trackedInformers) Shutdown() { t.wg.Wait() }
