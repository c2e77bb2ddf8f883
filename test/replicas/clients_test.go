package replicas

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// viewGVR is the resource every client reads.
var viewGVR = schema.GroupVersionResource{Group: "implicit.dev", Version: "v1alpha1", Resource: "rolebindings"}

const (
	// sourceRVAnnotation carries, on a view item, the resourceVersion of the
	// source it was merged from.
	sourceRVAnnotation = "implicit.dev/source-resource-version"
	// counterBits is pkg/watchmux's split of the sequence number a
	// resourceVersion carries as its issuer's hint: the bits above it name
	// the instance (the replica) that issued it.
	counterBits = 40
	// pauseAfterExpired is how long a client waits before it relists after a
	// 410, and after any other failure: about client-go's reflector's first
	// back-off, and a bound on a client's request rate.
	pauseAfterExpired = 500 * time.Millisecond
)

// watchTimeout returns a watch's timeoutSeconds, uniformly in [min, 2*min)
// as client-go's reflector draws it, so renewals don't march in step.
func watchTimeout(min time.Duration) int64 {
	s := int64(min / time.Second)
	return s + rand.Int64N(s)
}

// informerStats counts what informer-style clients saw.
type informerStats struct {
	lists    int // the first list and every relist
	renewals int // watches from a list's or an event's resourceVersion
	relists  int // of those, the ones that answered 410 Expired
	// retries are watches sent again from the same version after the
	// server could not be reached (retryUnavailable); retryErrors are the
	// first few of their causes.
	retries     int
	retryErrors []string
	other       []string
	// instances are the replicas (the hint's sequence number >>
	// counterBits) that issued a version a client received.
	instances map[uint64]bool
}

// informer is a client that does what client-go's reflector does for an
// informer, and counts it: list, watch from the list's resourceVersion
// with bookmarks and a short timeoutSeconds, renew each ended watch from the
// last event's version, relist on 410. It keeps the source resourceVersion
// of every item it holds, so that a test can tell when it has caught up.
//
// With retryUnavailable set, a watch that fails because no server could be
// reached (a 503 from kube-apiserver's aggregator, which answers it while
// the APIService has no replica up; a connection refused or reset; the
// stream cut off) is sent again from the same version, with a growing
// pause, for up to retryUnavailable before the client relists. client-go's
// reflector does this only for a connection refused and a 429
// (isWatchErrorRetriable): on a 503 it relists, from its last version
// (kubernetes/kubernetes#119646). A test counts on such a client to measure
// what the server does after an outage, not what the reflector does.
type informer struct {
	client     dynamic.ResourceInterface
	minTimeout time.Duration
	// retryUnavailable bounds how long a watch is retried from its version
	// while no server can be reached; 0 relists at once.
	retryUnavailable time.Duration

	mu    sync.Mutex
	stats informerStats
	items map[string]string // namespace/name -> source resourceVersion
	// opened is when the client's last watch was answered.
	opened time.Time
}

func newInformer(client dynamic.ResourceInterface, minTimeout time.Duration) *informer {
	return &informer{client: client, minTimeout: minTimeout, stats: informerStats{instances: map[uint64]bool{}}}
}

// run lists and watches until ctx ends.
func (in *informer) run(ctx context.Context) {
	rv := ""
	// unreachableSince is when the current run of watches that reached no
	// server began; zero while the last one did.
	var unreachableSince time.Time
	pause := pauseAfterExpired
	for ctx.Err() == nil {
		if rv == "" {
			var err error
			if rv, err = in.list(ctx); err != nil {
				in.failed(ctx, "list", err)
				continue
			}
		}
		next, err := in.watch(ctx, rv)
		if err == nil || !unreachable(err) {
			unreachableSince, pause = time.Time{}, pauseAfterExpired
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && unreachable(err) && in.retryUnavailable > 0 &&
			(unreachableSince.IsZero() || time.Since(unreachableSince) < in.retryUnavailable):
			if unreachableSince.IsZero() {
				unreachableSince = time.Now()
			}
			in.count(func(s *informerStats) {
				s.retries++
				if len(s.retryErrors) < 3 {
					s.retryErrors = append(s.retryErrors, err.Error())
				}
			})
			if next != "" {
				rv = next
			}
			sleep(ctx, pause+rand.N(pause/2))
			pause = min(2*pause, maxRetryPause)
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			in.count(func(s *informerStats) { s.relists++ })
			rv = ""
			sleep(ctx, pauseAfterExpired)
		case err != nil:
			in.failed(ctx, "watch", err)
			rv = ""
		default:
			rv = next
		}
	}
}

// maxRetryPause caps the pause between two watches retried from one
// version.
const maxRetryPause = 4 * time.Second

// unreachable reports whether err says that the watch reached no server:
// kube-apiserver's aggregator answered 503 (no replica up, or none
// reachable), the connection was refused or reset, or the stream was cut
// off in the middle (client-go reports that as an ERROR event with a 500
// it made itself, a "ClientWatchDecoding" cause).
func unreachable(err error) bool {
	if apierrors.IsServiceUnavailable(err) || utilnet.IsConnectionRefused(err) ||
		utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) {
		return true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		for _, c := range status.Status().Details.Causes {
			if c.Type == "ClientWatchDecoding" {
				return true
			}
		}
	}
	return false
}

// list replaces the items and returns the list's resourceVersion.
func (in *informer) list(ctx context.Context) (string, error) {
	list, err := in.client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	items := map[string]string{}
	for _, item := range list.Items {
		items[item.GetNamespace()+"/"+item.GetName()] = item.GetAnnotations()[sourceRVAnnotation]
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.stats.lists++
	in.items = items
	in.seenLocked(list.GetResourceVersion())
	return list.GetResourceVersion(), nil
}

// watch watches from rv until the server ends the watch, and returns the
// version to renew from. A 410, whether the answer to the request or an
// ERROR event in the stream, is returned as an Expired error. An ERROR
// event is returned with the version of the last event before it.
func (in *informer) watch(ctx context.Context, rv string) (string, error) {
	timeout := watchTimeout(in.minTimeout)
	in.count(func(s *informerStats) { s.renewals++ })
	w, err := in.client.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true, TimeoutSeconds: &timeout})
	if err != nil {
		return "", err
	}
	defer w.Stop()
	in.mu.Lock()
	in.opened = time.Now()
	in.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, nil
			}
			if ev.Type == watch.Error {
				return rv, apierrors.FromObject(ev.Object)
			}
			obj, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				return "", fmt.Errorf("unexpected %s event object %T", ev.Type, ev.Object)
			}
			rv = obj.GetResourceVersion()
			in.mu.Lock()
			in.seenLocked(rv)
			switch ev.Type {
			case watch.Added, watch.Modified:
				in.items[obj.GetNamespace()+"/"+obj.GetName()] = obj.GetAnnotations()[sourceRVAnnotation]
			case watch.Deleted:
				delete(in.items, obj.GetNamespace()+"/"+obj.GetName())
			}
			in.mu.Unlock()
		}
	}
}

func (in *informer) failed(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return
	}
	at := time.Now().Format("15:04:05.000")
	in.count(func(s *informerStats) { s.other = append(s.other, fmt.Sprintf("%s %s: %v", at, what, err)) })
	sleep(ctx, pauseAfterExpired)
}

func (in *informer) count(f func(*informerStats)) {
	in.mu.Lock()
	defer in.mu.Unlock()
	f(&in.stats)
}

func (in *informer) seenLocked(rv string) {
	if v, err := resourceversion.Parse(rv); err == nil && v.Seq != 0 {
		in.stats.instances[v.Seq>>counterBits] = true
	}
}

// sourceRV is the source resourceVersion of the item namespace/name the
// client holds.
func (in *informer) sourceRV(key string) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.items[key]
}

// openedSince reports whether a watch of the client was answered after t.
func (in *informer) openedSince(t time.Time) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.opened.After(t)
}

// held is a copy of what the client holds: namespace/name -> source
// resourceVersion.
func (in *informer) held() map[string]string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return maps.Clone(in.items)
}

func (in *informer) snapshot() informerStats {
	in.mu.Lock()
	defer in.mu.Unlock()
	s := in.stats
	s.other = append([]string(nil), s.other...)
	s.retryErrors = append([]string(nil), s.retryErrors...)
	s.instances = map[uint64]bool{}
	for k, v := range in.stats.instances {
		s.instances[k] = v
	}
	return s
}

// kubectlStats counts `kubectl get -w` runs.
type kubectlStats struct {
	runs   int
	failed []string // one line per failed run: how it failed
}

// kubectlWatcher runs `kubectl get rolebindings.implicit.dev -n NS -w`
// again and again, each run for a random while in [min, 2*min) before it
// is interrupted, as a user renewing a watch would, and counts the runs
// that fail: kubectl exits by itself with an error, or prints an error.
type kubectlWatcher struct {
	kubectl    string
	kubeconfig string
	namespace  string
	minRun     time.Duration

	mu    sync.Mutex
	stats kubectlStats
}

// run runs kubectl until ctx ends.
func (k *kubectlWatcher) run(ctx context.Context) {
	for ctx.Err() == nil {
		runFor := k.minRun + rand.N(k.minRun)
		failure, counted := k.once(ctx, runFor)
		if !counted {
			return
		}
		k.mu.Lock()
		k.stats.runs++
		if failure != "" {
			k.stats.failed = append(k.stats.failed, failure)
		}
		k.mu.Unlock()
		if failure != "" {
			sleep(ctx, pauseAfterExpired)
		}
	}
}

// once runs kubectl for runFor and returns why it failed ("" when it did
// not); counted is false when ctx ended the run first, which says nothing.
func (k *kubectlWatcher) once(ctx context.Context, runFor time.Duration) (failure string, counted bool) {
	runCtx, cancel := context.WithTimeout(ctx, runFor)
	defer cancel()
	cmd := exec.CommandContext(runCtx, k.kubectl, "--kubeconfig="+k.kubeconfig,
		"get", "rolebindings.implicit.dev", "-n", k.namespace, "-w")
	// Interrupted as a user would: kubectl stops its watch and exits.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		return "", false
	}
	interrupted := runCtx.Err() != nil
	if line := errorLine(stdout.String(), stderr.String()); line != "" {
		return line, true
	}
	if err != nil && !interrupted {
		return fmt.Sprintf("exited by itself: %v", err), true
	}
	return "", true
}

// errorLine returns the first line of kubectl's output that reports an
// error: anything on stderr but warnings, or a Status printed as a table
// row ("Failure ...") on stdout.
func errorLine(stdout, stderr string) string {
	sc := bufio.NewScanner(strings.NewReader(stderr))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "Warning:") {
			return line
		}
	}
	sc = bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "Failure ") {
			return line
		}
	}
	return ""
}

// isExpired reports whether a line errorLine found reports a 410 Expired:
// on stderr when the watch request is answered 410 ("Error from server
// (Expired): ..."), as a table row when it is an ERROR event in the stream
// ("Failure   Expired   ...").
func isExpired(line string) bool {
	if strings.Contains(line, "(Expired)") {
		return true
	}
	f := strings.Fields(line)
	return len(f) >= 2 && f[0] == "Failure" && f[1] == "Expired"
}

func (k *kubectlWatcher) snapshot() kubectlStats {
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.stats
	s.failed = append([]string(nil), s.failed...)
	return s
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// per100 is n per 100 of total.
func per100(n, total int) float64 {
	if total == 0 {
		return 0
	}
	return 100 * float64(n) / float64(total)
}
