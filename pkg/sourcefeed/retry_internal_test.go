package sourcefeed

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	corev1 "k8s.io/api/core/v1"
)

// refused is the error a dial to a stopped kube-apiserver returns.
func refused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// TestRetryWhileUnavailable: a list or watch that kube-apiserver could not
// answer (refused connection, 429, 503) is sent again by the tracked
// ListerWatcher, at most a second apart, so the reflector neither sees the
// failure nor backs off; an answer (410, a too-large version, 403) reaches
// the reflector at once, and a stopped informer stops the retries.
func TestRetryWhileUnavailable(t *testing.T) {
	gr := schema.GroupResource{Resource: "rolebindings"}
	down := []error{refused(), refused(), apierrors.NewTooManyRequests("storage is (re)initializing", 1),
		apierrors.NewServiceUnavailable("not ready"), refused(), refused(), refused(), refused()}

	synctest.Test(t, func(t *testing.T) {
		var calls []time.Duration
		start := time.Now()
		lw := &cache.ListWatch{
			ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
				calls = append(calls, time.Since(start))
				if len(calls) <= len(down) {
					return nil, down[len(calls)-1]
				}
				return &corev1.NamespaceList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}, nil
			},
		}
		tr := New("namespaces", lw)
		got, err := tr.ListerWatcher().(cache.ListerWithContext).ListWithContext(context.Background(), metav1.ListOptions{})
		if err != nil || got.(*corev1.NamespaceList).ResourceVersion != "7" {
			t.Fatalf("list: %v, %v; want the list kube-apiserver answered once back", got, err)
		}
		if len(calls) != len(down)+1 {
			t.Fatalf("%d calls, want %d", len(calls), len(down)+1)
		}
		for i := 1; i < len(calls); i++ {
			if gap := calls[i] - calls[i-1]; gap < retryFirst || gap > retryMax*3/2 {
				t.Errorf("call %d came %v after the one before, want %v to %v", i+1, gap, retryFirst, retryMax*3/2)
			}
		}
	})

	tooLarge := apierrors.NewTimeoutError("Too large resource version", 1)
	tooLarge.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge}}
	for _, answer := range []error{
		apierrors.NewResourceExpired("too old resource version: 5 (9)"),
		tooLarge,
		apierrors.NewForbidden(gr, "", errors.New("no")),
	} {
		calls := 0
		lw := &cache.ListWatch{
			WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
				calls++
				return nil, answer
			},
		}
		_, err := New("rolebindings", lw).ListerWatcher().(cache.WatcherWithContext).WatchWithContext(context.Background(), metav1.ListOptions{})
		if err != answer || calls != 1 {
			t.Errorf("watch answered %v: got %v after %d calls, want it at once", answer, err, calls)
		}
	}

	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		lw := &cache.ListWatch{
			WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
				calls++
				if calls == 3 {
					cancel()
				}
				return nil, refused()
			},
		}
		_, err := New("roles", lw).ListerWatcher().(cache.WatcherWithContext).WatchWithContext(ctx, metav1.ListOptions{})
		if !errors.Is(err, syscall.ECONNREFUSED) || calls != 3 {
			t.Errorf("stopped while kube-apiserver was down: %v after %d calls, want the refusal after 3", err, calls)
		}
	})
}
