package conformance

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/tools/cache"
)

func gvrOf(tg target) schema.GroupVersionResource {
	if tg == native {
		return schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
	}
	return schema.GroupVersionResource{Group: "implicit.dev", Version: "v1alpha1", Resource: "rolebindings"}
}

// recorder keeps an informer's handler calls.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) add(kind string, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	name := "?"
	if ok {
		name = u.GetName()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, kind+" "+name)
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.calls, ", ")
}

// TestInformers runs client-go informers on both sides, with the
// WatchListClient feature off (list, then watch) and on (watch-list), and
// compares the handler calls and the final stores. Not parallel: the
// feature gate is process-wide.
func TestInformers(t *testing.T) {
	for _, watchList := range []bool{false, true} {
		t.Run(fmt.Sprintf("WatchListClient=%t", watchList), func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, watchList)
			w := newWorld(t, []string{"rb-a", "rb-b"}, nil)
			dyn, err := dynamic.NewForConfig(cp.AdminConfig())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			recs := map[target]*recorder{}
			stores := map[target]cache.Store{}
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			for _, tg := range []target{native, view} {
				ri := dyn.Resource(gvrOf(tg)).Namespace(w.ns)
				lw := &cache.ListWatch{
					ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return ri.List(ctx, o) },
					WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
						return ri.Watch(ctx, o)
					},
				}
				inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
				rec := &recorder{}
				if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
					AddFunc:    func(obj any) { rec.add("add", obj) },
					UpdateFunc: func(_, obj any) { rec.add("update", obj) },
					DeleteFunc: func(obj any) { rec.add("delete", obj) },
				}); err != nil {
					t.Fatal(err)
				}
				recs[tg], stores[tg] = rec, inf.GetStore()
				wg.Add(1)
				go func() { defer wg.Done(); inf.RunWithContext(ctx) }()
				if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
					t.Fatalf("%s informer never synced", tg)
				}
			}
			w.create("rb-c", nil)
			w.relabel("rb-a", map[string]string{"x": "1"})
			w.delete("rb-b")
			want := "add rb-a, add rb-b, add rb-c, update rb-a, delete rb-b"
			for _, tg := range []target{native, view} {
				err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, converge, true, func(context.Context) (bool, error) {
					return sortedAdds(recs[tg].String()) == want, nil
				})
				if err != nil {
					t.Errorf("%s informer calls: %s, want %s", tg, recs[tg], want)
				}
				keys := stores[tg].ListKeys()
				sort.Strings(keys)
				if got := strings.Join(keys, ","); got != w.ns+"/rb-a,"+w.ns+"/rb-c" {
					t.Errorf("%s informer store: %s", tg, got)
				}
			}
			t.Logf("native: %s\nview:   %s", recs[native], recs[view])
		})
	}
}

// sortedAdds orders the initial adds, which an informer may call in any
// order, and keeps the order of the rest.
func sortedAdds(calls string) string {
	parts := strings.Split(calls, ", ")
	n := 0
	for n < len(parts) && strings.HasPrefix(parts[n], "add rb-") && parts[n] != "add rb-c" {
		n++
	}
	sort.Strings(parts[:n])
	return strings.Join(parts, ", ")
}
