package materialize

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// BenchmarkGlobalEdit materializes one global edit to 1,000 namespaces
// against a fake host (no network, no rate limit, one worker, no queue):
// the materializer's own cost per namespace (read the view, compare with
// the copy, apply), from the source change to the last copy written. The whole-system
// figure is bounded by --materialize-qps instead (1,000 writes at 50/s:
// about 20 s).
//
//	go test -run '^$' -bench GlobalEdit -benchtime 3x ./pkg/materialize/
func BenchmarkGlobalEdit(b *testing.B) {
	for _, n := range []int{1000} {
		b.Run(fmt.Sprintf("namespaces=%d", n), func(b *testing.B) {
			objects := views.NewObjects(map[string]func() runtime.Object{
				"networkpolicies": func() runtime.Object { return &networkingv1.NetworkPolicy{} },
			}, 0)
			mux := watchmux.New(policy(), []string{"networkpolicies"}, objects, watchmux.Options{})
			mux.OnNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: global, UID: "uid-global"}}, false)
			for i := range n {
				name := fmt.Sprintf("tenant-%05d", i)
				mux.OnNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}, false)
			}
			rv := 1
			mux.OnSource("networkpolicies", netpol(global, "default-deny", "v0", fmt.Sprint(rv)), false)
			mux.MarkSynced()
			host := newFakeHost(b)
			m := New(mux, host, []kinds.Kind{npKind}, nil, Options{})
			list := host.list(b)
			ctx := context.Background()
			names := make([]string, n)
			for i := range n {
				names[i] = fmt.Sprintf("tenant-%05d", i)
			}
			// edit reconciles every namespace once, as the workers would,
			// and checks each wrote its copy.
			edit := func() {
				for _, ns := range names {
					w, err := m.reconcile(ctx, ns, list)
					if err != nil || w != 1 {
						b.Fatalf("%s: %d writes, %v", ns, w, err)
					}
				}
			}
			edit()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				rv++
				mux.OnSource("networkpolicies", netpol(global, "default-deny", fmt.Sprintf("v%d", rv), fmt.Sprint(rv)), false)
				edit()
			}
			elapsed := time.Since(start)
			b.ReportMetric(elapsed.Seconds()/float64(b.N), "s/edit")
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "writes/s")
		})
	}
}
