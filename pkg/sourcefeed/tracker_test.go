package sourcefeed_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/sourcefeed"
)

// fakeServer is a ConfigMap store with etcd-like revisions, lists, watches
// from a revision, watch-list, bookmarks, and a way to make every watch
// expire (410) so that the informer relists; a gate holds its lists.
type fakeServer struct {
	mu        sync.Mutex
	rev       uint64
	objs      map[string]*corev1.ConfigMap
	log       []watch.Event
	watches   []*watch.FakeWatcher
	watchList bool
	gate      chan struct{} // when set, lists wait for it to close
}

func newFakeServer(watchList bool) *fakeServer {
	return &fakeServer{objs: map[string]*corev1.ConfigMap{}, watchList: watchList}
}

func (s *fakeServer) IsWatchListSemanticsUnSupported() bool { return !s.watchList }

func (s *fakeServer) put(name, data string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev++
	typ := watch.Modified
	if _, ok := s.objs[name]; !ok {
		typ = watch.Added
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: strconv.FormatUint(s.rev, 10)}, Data: map[string]string{"v": data}}
	s.objs[name] = cm
	s.emitLocked(watch.Event{Type: typ, Object: cm.DeepCopy()})
}

func (s *fakeServer) remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev++
	cm := s.objs[name].DeepCopy()
	cm.ResourceVersion = strconv.FormatUint(s.rev, 10)
	delete(s.objs, name)
	s.emitLocked(watch.Event{Type: watch.Deleted, Object: cm})
}

func (s *fakeServer) emitLocked(ev watch.Event) {
	s.log = append(s.log, ev)
	for _, w := range s.watches {
		if !w.IsStopped() {
			w.Action(ev.Type, ev.Object)
		}
	}
}

// bookmark sends every watch a bookmark at the current revision.
func (s *fakeServer) bookmark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.watches {
		if !w.IsStopped() {
			w.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.FormatUint(s.rev, 10)}})
		}
	}
}

// expire ends every watch with 410 Gone: the reflector relists.
func (s *fakeServer) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.watches {
		if !w.IsStopped() {
			w.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
			w.Stop()
		}
	}
	s.watches = nil
}

func (s *fakeServer) itemsLocked() []corev1.ConfigMap {
	names := make([]string, 0, len(s.objs))
	for n := range s.objs {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]corev1.ConfigMap, 0, len(names))
	for _, n := range names {
		out = append(out, *s.objs[n].DeepCopy())
	}
	return out
}

func (s *fakeServer) ListWithContext(_ context.Context, _ metav1.ListOptions) (runtime.Object, error) {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(s.rev, 10)}, Items: s.itemsLocked()}, nil
}

func (s *fakeServer) WatchWithContext(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	initial := o.SendInitialEvents != nil && *o.SendInitialEvents
	if initial && gate != nil {
		<-gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := watch.NewFakeWithChanSize(10000, false)
	if initial {
		for _, cm := range s.itemsLocked() {
			w.Add(&cm)
		}
		w.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: strconv.FormatUint(s.rev, 10),
			Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
		}})
	} else {
		from, _ := strconv.ParseUint(o.ResourceVersion, 10, 64)
		for _, ev := range s.log {
			acc, _ := meta.Accessor(ev.Object)
			if n, _ := strconv.ParseUint(acc.GetResourceVersion(), 10, 64); n > from {
				w.Action(ev.Type, ev.Object)
			}
		}
	}
	s.watches = append(s.watches, w)
	return w, nil
}

func (s *fakeServer) List(o metav1.ListOptions) (runtime.Object, error) {
	return s.ListWithContext(context.Background(), o)
}

func (s *fakeServer) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return s.WatchWithContext(context.Background(), o)
}

// call is one Sink call.
type call struct {
	progress bool
	listed   bool
	rev      uint64
	changes  []string // "name@rv" or "-name"
}

func (c call) String() string {
	if c.progress {
		return fmt.Sprintf("progress@%d", c.rev)
	}
	if c.listed {
		return fmt.Sprintf("listed@%d", c.rev)
	}
	return fmt.Sprintf("apply@%d%v", c.rev, c.changes)
}

type recorder struct {
	mu    sync.Mutex
	calls []call
}

func (r *recorder) Apply(changes []sourcefeed.Change, rev uint64) {
	var cs []string
	for _, c := range changes {
		obj := c.Object
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		acc, _ := meta.Accessor(obj)
		if c.Deleted {
			cs = append(cs, "-"+acc.GetName())
		} else {
			cs = append(cs, acc.GetName()+"@"+acc.GetResourceVersion())
		}
	}
	sort.Strings(cs)
	r.mu.Lock()
	r.calls = append(r.calls, call{rev: rev, changes: cs})
	r.mu.Unlock()
}

func (r *recorder) Progress(rev uint64) {
	r.mu.Lock()
	r.calls = append(r.calls, call{progress: true, rev: rev})
	r.mu.Unlock()
}

func (r *recorder) Listed(rev uint64) {
	r.mu.Lock()
	r.calls = append(r.calls, call{listed: true, rev: rev})
	r.mu.Unlock()
}

// waitFor waits until the calls end with want.
func (r *recorder) waitFor(t *testing.T, want ...string) {
	t.Helper()
	testwait.Within(t, 5*time.Millisecond, 10*time.Second, fmt.Sprintf("the sink calls to end with %v", want), func(context.Context) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.calls) >= len(want) {
			var got []string
			for _, c := range r.calls[len(r.calls)-len(want):] {
				got = append(got, c.String())
			}
			if slices.Equal(got, want) {
				return nil
			}
		}
		return fmt.Errorf("sink calls %v", r.calls)
	})
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// TestRelistIsOneChangeAtTheListRevision drives a real client-go informer
// through a relist after its watch expired, with the list and with
// watch-list: the edits it missed reach the sink as one change at the
// list's revision, never one at a time with revisions that name no state
// (client-go delivers the relist's changes in key order: a@5 before b@4).
func TestRelistIsOneChangeAtTheListRevision(t *testing.T) {
	for _, watchList := range []bool{false, true} {
		t.Run(fmt.Sprintf("watchList=%v", watchList), func(t *testing.T) {
			s := newFakeServer(watchList)
			s.put("a", "1") // 1
			s.put("b", "1") // 2
			s.put("c", "1") // 3
			tr := sourcefeed.New("configmaps", s)
			rec := &recorder{}
			tr.SetSink(rec)
			inf := cache.NewSharedIndexInformer(tr.ListerWatcher(), &corev1.ConfigMap{}, 0, cache.Indexers{})
			if _, err := inf.AddEventHandler(tr.Handler()); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go inf.RunWithContext(ctx)

			rec.waitFor(t, "apply@3[a@1 b@2 c@3]")
			s.put("a", "2") // 4
			rec.waitFor(t, "apply@4[a@4]")
			s.bookmark()
			rec.waitFor(t, "apply@4[a@4]", "progress@4")

			// The watch expires; while the informer is away, b then a
			// change and c goes.
			s.mu.Lock()
			s.gate = make(chan struct{})
			s.mu.Unlock()
			s.expire()
			s.put("b", "2") // 5
			s.put("a", "3") // 6
			s.remove("c")   // 7
			before := rec.count()
			close(s.gate)
			rec.waitFor(t, "apply@7[-c a@6 b@5]")
			if got := rec.count(); got != before+1 {
				t.Errorf("the relist reached the sink as %d calls, want 1", got-before)
			}

			// A relist that finds nothing new hands the handler every
			// item again (resyncs): listed at its revision, not a change
			// (a change would forget a catch-up's equal revision and
			// name the same state by an older one: issue 38), nor a
			// bookmark's progress (the writes it missed are unknown).
			s.mu.Lock()
			s.gate = nil
			s.mu.Unlock()
			s.expire()
			rec.waitFor(t, "apply@7[-c a@6 b@5]", "listed@7")
			s.put("d", "1") // 8
			rec.waitFor(t, "listed@7", "apply@8[d@8]")
			if n := tr.Misaligned(); n != 0 {
				t.Errorf("misaligned relists: %d", n)
			}
		})
	}
}
