package robustness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// recorder keeps the run's faults and every 410 a client got, with what
// it answered.
type recorder struct {
	mu          sync.Mutex
	lastFault   string
	lastFaultAt time.Time
	gone        []string
	goneByFault map[string]int
	// restartedAt is when kube-apiserver last came back: its watch cache
	// starts there, and it answers 410 to its own kinds' older versions.
	restartedAt time.Time
	// unexplained are the 410s for a version a client got less than a
	// compaction interval ago, with no kube-apiserver restart since: for
	// its own kinds kube-apiserver would have served it.
	unexplained []string
	// recreated are the 410s for a version that names a namespace as it
	// was before it was deleted and created again: a past view is answered
	// only for the namespace as it is now (issue 38's case 8, a contract
	// of its own), where kube-apiserver would replay the deletion.
	recreated []string
}

func newRecorder() *recorder { return &recorder{goneByFault: map[string]int{}} }

func (r *recorder) fault(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastFault, r.lastFaultAt = kind, time.Now()
}

func (r *recorder) kubeAPIServerBack() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restartedAt = time.Now()
}

// answered410 records a 410 that client got for version, which it had
// held since at.
func (r *recorder) answered410(client, request, version string, at time.Time, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	after := "no fault yet"
	if r.lastFault != "" {
		after = fmt.Sprintf("%s %s before", r.lastFault, time.Since(r.lastFaultAt).Round(time.Second))
	}
	r.goneByFault[r.lastFault]++
	msg, _, _ := strings.Cut(err.Error(), "\n")
	line := fmt.Sprintf("%s: %s from %s (held %s; after %s): %s",
		client, request, version, time.Since(at).Round(time.Second), after, msg)
	r.gone = append(r.gone, line)
	switch {
	case strings.Contains(msg, "as it was before it was deleted"):
		r.recreated = append(r.recreated, line)
	case time.Since(at) < compaction && r.restartedAt.Before(at):
		r.unexplained = append(r.unexplained, line)
	}
}

// cutter is a client whose watch a fault can cut.
type cutter interface{ cut() }

// rawWatcher does what `kubectl get -w` does, resuming as a user would:
// list, watch from the list's version with bookmarks, and after any end or
// error watch again from the last version it saw; relist only on 410.
type rawWatcher struct {
	name, scope string
	client      dynamic.ResourceInterface
	log         *eventLog
	rec         *recorder

	mu          sync.Mutex
	cancelWatch context.CancelFunc
	lists       int
	watches     int
	// short are watches that ended by themselves within a second with
	// no event: the watcher waits a second before the next.
	short  int
	failed []string
	// ends counts how the watches ended.
	ends map[string]int
}

func newRawWatcher(dyn dynamic.Interface, scope string, rec *recorder) *rawWatcher {
	name := "kubectl-w(" + scopeName(scope) + ")"
	return &rawWatcher{name: name, scope: scope, client: dyn.Resource(viewGVR).Namespace(scope), log: newEventLog(name), rec: rec, ends: map[string]int{}}
}

// watchEnd names how a watch ended, for the log: its error's reason (or
// "cut"), else whether it lasted a second and brought events.
func watchEnd(err, cut error, lasted time.Duration, events int) string {
	switch {
	case cut != nil:
		return "cut"
	case err != nil:
		return "error " + string(apierrors.ReasonForError(err))
	case lasted < time.Second && events == 0:
		return "closed at once, no event"
	case lasted < time.Second:
		return "closed within 1s, with events"
	}
	return "closed after 1s or more"
}

func scopeName(scope string) string {
	if scope == "" {
		return "-A"
	}
	return scope
}

func (r *rawWatcher) run(ctx context.Context) {
	version := ""
	for ctx.Err() == nil {
		if version == "" {
			list, err := r.client.List(ctx, metav1.ListOptions{})
			if err != nil {
				r.note("list", err)
				sleep(ctx, 500*time.Millisecond)
				continue
			}
			r.log.listed(list.Items, list.GetResourceVersion())
			version = list.GetResourceVersion()
			r.count(func() { r.lists++ })
		}
		r.log.resumed(version)
		wctx, cancel := context.WithCancel(ctx)
		r.mu.Lock()
		r.cancelWatch = cancel
		r.watches++
		r.mu.Unlock()
		timeout := int64(5 + rand.IntN(5))
		started, before := time.Now(), r.log.snapshot().events
		w, err := r.client.Watch(wctx, metav1.ListOptions{ResourceVersion: version, AllowWatchBookmarks: true, TimeoutSeconds: &timeout})
		if err == nil {
			err = r.follow(w)
			w.Stop()
		}
		// Whether a fault cut the watch, read before cancel() ends it.
		cut := wctx.Err()
		cancel()
		r.count(func() { r.ends[watchEnd(err, cut, time.Since(started), r.log.snapshot().events-before)]++ })
		if err == nil && cut == nil && time.Since(started) < time.Second && r.log.snapshot().events == before {
			r.count(func() { r.short++ })
			sleep(ctx, time.Second)
		}
		switch {
		case ctx.Err() != nil:
			return
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			_, at := r.log.lastVersion()
			r.rec.answered410(r.name, "watch", version, at, err)
			version = ""
		case err != nil && cut == nil:
			r.note("watch", err)
			sleep(ctx, 500*time.Millisecond)
			fallthrough
		default:
			if v, _ := r.log.lastVersion(); v != "" {
				version = v
			}
		}
	}
}

// follow applies the watch's events until it ends; an ERROR event is
// returned as an error.
func (r *rawWatcher) follow(w watch.Interface) error {
	for ev := range w.ResultChan() {
		if ev.Type == watch.Error {
			return apierrors.FromObject(ev.Object)
		}
		r.log.event(ev)
	}
	return nil
}

func (r *rawWatcher) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancelWatch != nil {
		r.cancelWatch()
	}
}

func (r *rawWatcher) note(what string, err error) {
	r.count(func() {
		if len(r.failed) < 5 {
			msg, _, _ := strings.Cut(err.Error(), "\n")
			r.failed = append(r.failed, what+": "+msg)
		}
	})
}

func (r *rawWatcher) count(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

func (r *rawWatcher) holding() map[string]string { return r.log.holding() }

// goInformer is a client-go shared informer of the views, its reflector
// unchanged, with watch-list (client-go v0.37's default) or without it (a
// ListerWatcher that reports IsWatchListSemanticsUnSupported). Its
// requests go through an eventLog that checks every raw event, and a
// fault can stop its current watch.
type goInformer struct {
	name, scope string
	informer    cache.SharedIndexInformer
	log         *eventLog
	rec         *recorder

	mu      sync.Mutex
	current watch.Interface
	// lists and watchLists: the first list and every relist; watches:
	// watches from a version.
	lists, watchLists, watches int
	errors                     []string
}

// noWatchList is a ListerWatcher whose client does not support watch-list.
type noWatchList struct{ *cache.ListWatch }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

func newGoInformer(admin *rest.Config, scope string, watchList bool, rec *recorder) *goInformer {
	name := fmt.Sprintf("informer(%s, watch-list=%t)", scopeName(scope), watchList)
	g := &goInformer{name: name, scope: scope, log: newEventLog(name), rec: rec}
	cfg := rest.CopyConfig(admin)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return goneTransport{rt: rt, g: g} })
	dyn := dynamic.NewForConfigOrDie(cfg)
	client := dyn.Resource(viewGVR).Namespace(scope)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := client.List(ctx, opts)
			if err != nil {
				g.noteError(err)
				return list, err
			}
			if opts.Continue == "" {
				g.log.listed(list.Items, list.GetResourceVersion())
				g.count(func() { g.lists++ })
			}
			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := client.Watch(ctx, opts)
			if err != nil {
				g.noteError(err)
				return nil, err
			}
			if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
				g.log.initialEvents()
				g.count(func() { g.watchLists++ })
			} else {
				g.log.resumed(opts.ResourceVersion)
				g.count(func() { g.watches++ })
			}
			fw := watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				if e.Type == watch.Error {
					err := apierrors.FromObject(e.Object)
					g.noteError(err)
					if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
						_, at := g.log.lastVersion()
						rec.answered410(name, "watch stream", opts.ResourceVersion, at, err)
					}
				}
				g.log.event(e)
				return e, true
			})
			g.mu.Lock()
			g.current = fw
			g.mu.Unlock()
			return fw, nil
		},
	}
	var lwi cache.ListerWatcher = cache.ToListWatcherWithWatchListSemantics(lw, dyn)
	if !watchList {
		lwi = noWatchList{lw}
	}
	g.informer = cache.NewSharedIndexInformerWithOptions(lwi, &unstructured.Unstructured{}, cache.SharedIndexInformerOptions{})
	return g
}

func (g *goInformer) cut() {
	g.mu.Lock()
	w := g.current
	g.mu.Unlock()
	if w != nil {
		w.Stop()
	}
}

func (g *goInformer) noteError(err error) {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if i := strings.Index(msg, "resourceVersion"); i >= 0 {
		msg = msg[:i] + "…"
	}
	g.count(func() { g.errors = append(g.errors, msg) })
}

func (g *goInformer) count(f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f()
}

// holding is what the informer's store holds.
func (g *goInformer) holding() map[string]string {
	out := map[string]string{}
	for _, obj := range g.informer.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			out[keyOf(u)] = summary(u)
		}
	}
	return out
}

// goneTransport records the informer's requests answered 410.
type goneTransport struct {
	rt http.RoundTripper
	g  *goInformer
}

func (t goneTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusGone {
		q := req.URL.Query()
		what := "list"
		if q.Get("watch") == "true" {
			what = "watch"
		}
		_, at := t.g.log.lastVersion()
		t.g.rec.answered410(t.g.name, what, q.Get("resourceVersion"), at, fmt.Errorf("410 %s", req.URL.RawQuery))
	}
	return resp, err
}

// pager lists the views two items a page, as `kubectl get --chunk-size=2`
// does, each page through the aggregator to either replica.
type pager struct {
	dyn    dynamic.Interface
	scopes []string

	mu sync.Mutex
	// lists completed, pages read, and the errors by reason.
	lists, pages   int
	errors         map[string]int
	duplicateItems int
	samples        []string
}

func newPager(dyn dynamic.Interface, scopes []string) *pager {
	return &pager{dyn: dyn, scopes: scopes, errors: map[string]int{}}
}

func (p *pager) run(ctx context.Context) {
	for ctx.Err() == nil {
		scope := p.scopes[rand.IntN(len(p.scopes))]
		if _, err := p.listAll(ctx, scope); err != nil && ctx.Err() == nil {
			p.mu.Lock()
			p.errors[string(apierrors.ReasonForError(err))+" "+errorKind(err)]++
			if len(p.samples) < 5 {
				msg, _, _ := strings.Cut(err.Error(), "\n")
				p.samples = append(p.samples, msg)
			}
			p.mu.Unlock()
		}
		sleep(ctx, 300*time.Millisecond)
	}
}

func errorKind(err error) string {
	if s, ok := err.(apierrors.APIStatus); ok {
		return fmt.Sprint(s.Status().Code)
	}
	return "transport"
}

// listAll reads every page of scope's view and returns the items'
// summaries; an item on two pages is counted.
func (p *pager) listAll(ctx context.Context, scope string) (map[string]string, error) {
	out := map[string]string{}
	cont := ""
	for {
		list, err := p.dyn.Resource(viewGVR).Namespace(scope).List(ctx, metav1.ListOptions{Limit: 2, Continue: cont})
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		p.pages++
		for i := range list.Items {
			k := keyOf(&list.Items[i])
			if _, ok := out[k]; ok {
				p.duplicateItems++
				if len(p.samples) < 5 {
					p.samples = append(p.samples, "item on two pages: "+k)
				}
			}
			out[k] = summary(&list.Items[i])
		}
		p.mu.Unlock()
		if cont = list.GetContinue(); cont == "" {
			break
		}
	}
	p.mu.Lock()
	p.lists++
	p.mu.Unlock()
	return out, nil
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
