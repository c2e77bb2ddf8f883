package sourcefeed

import (
	"context"
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/klog/v2"
)

// Retrying while kube-apiserver is unavailable.
//
// The reflector backs off after every failed list or watch (0.8 s doubling
// to 30 s, with as much again of jitter) and resets only after two minutes
// without a failure. A kube-apiserver restart of ten seconds fails a
// handful of calls, so the informer then sits up to a minute in backoff
// after kube-apiserver is back: its source's part of every version stays
// at the revision before the restart, the compaction passes it, and a
// replica asked to resume from such a version answers 410. kube-apiserver's
// own watch cache is back within a second of etcd. So the tracked
// ListerWatcher retries a call that failed because kube-apiserver is
// unavailable (refused or reset connection, 429, 503, 504) itself, at a
// short, bounded interval, and the reflector sees only the answer: a
// relist's 410, which it must see, comes through at once.
const (
	retryFirst = 200 * time.Millisecond
	retryMax   = time.Second
)

// unavailable reports whether err says kube-apiserver could not answer,
// rather than answering no: only such a call is worth sending again as is.
func unavailable(err error) bool {
	switch {
	case err == nil:
		return false
	case apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge):
		// The reflector answers this one itself, listing afresh.
		return false
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err):
		return true
	case apierrors.IsTooManyRequests(err), apierrors.IsServiceUnavailable(err),
		apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return true
	}
	return false
}

// retry calls do until it returns an error that is not unavailable, or ctx
// ends (then the last error). It waits first, then doubling up to max, each
// wait with up to half again of jitter so the replicas' informers spread.
func retry[T any](ctx context.Context, name, call string, first, most time.Duration, do func() (T, error)) (T, error) {
	wait := first
	var since time.Time
	for tries := 1; ; tries++ {
		got, err := do()
		if !unavailable(err) {
			if tries > 1 {
				klog.V(2).InfoS("kube-apiserver answers a source again", "resource", name, "call", call, "tries", tries, "after", time.Since(since).Round(time.Millisecond))
			}
			return got, err
		}
		if tries == 1 {
			since = time.Now()
			klog.V(2).InfoS("kube-apiserver is unavailable to a source: trying again", "resource", name, "call", call, "err", err)
		}
		timer := time.NewTimer(wait + rand.N(wait/2+1))
		select {
		case <-ctx.Done():
			timer.Stop()
			return got, err
		case <-timer.C:
		}
		wait = min(2*wait, most)
	}
}
