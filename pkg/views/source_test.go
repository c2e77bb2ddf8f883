package views_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	"github.com/implicit-dev/implicit-apiserver/pkg/registry"
	"github.com/implicit-dev/implicit-apiserver/pkg/views"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// TestViewResourceVersion checks that reads carry the mux's version, and
// that it moves with the views.
func TestViewResourceVersion(t *testing.T) {
	t.Parallel()
	view, mux := newView(rolebindings,
		[]*corev1.Namespace{namespace(global), namespace("team")},
		roleBinding(global, "org-viewers"), roleBinding("team", "local"))
	ctx := context.Background()

	t.Log("List returns the mux's version, and so do its items and Get's")
	_, rv, err := view.List(ctx, "team")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if want := currentRV(t, mux); rv != want {
		t.Fatalf("List resourceVersion = %q, want the mux's %q", rv, want)
	}
	first := parseRV(t, rv)
	got, err := view.Get(ctx, "team", "org-viewers")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if m, _ := meta.Accessor(got); m.GetResourceVersion() != rv {
		t.Errorf("Get resourceVersion = %q, want %q", m.GetResourceVersion(), rv)
	}

	t.Log("A change of a view moves the version; List returns the new one and the new item")
	mux.OnSource(rolebindings.Resource, roleBinding("team", "added"), false)
	list, rv2, err := view.List(ctx, "team")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if want := currentRV(t, mux); rv2 != want {
		t.Errorf("List resourceVersion = %q, want the mux's %q", rv2, want)
	}
	if parseRV(t, rv2) <= first {
		t.Errorf("resourceVersion after a change = %s, want more than %s", rv2, rv)
	}
	want := []string{"added local team", "local local team", "org-viewers global implicit-global"}
	if s := summaries(t, list); !reflect.DeepEqual(s, want) {
		t.Errorf("List = %q, want %q", s, want)
	}
	for _, obj := range list {
		if m, _ := meta.Accessor(obj); m.GetResourceVersion() != rv2 {
			t.Errorf("item %s: resourceVersion = %q, want the list's %q", m.GetName(), m.GetResourceVersion(), rv2)
		}
	}

	t.Log("A change that changes no view keeps the version: an excluded namespace without items")
	mux.OnNamespace(namespace("kube-public"), false)
	if _, rv3, err := view.List(ctx, ""); err != nil || rv3 != rv2 {
		t.Errorf(`List("") = %q, %v; want resourceVersion %q`, rv3, err, rv2)
	}
}

// TestViewNotSynced checks that reads before the sources are read answer
// 503, and that what was fed before is served once they are.
func TestViewNotSynced(t *testing.T) {
	t.Parallel()
	mux := newUnsyncedMux(rolebindings.Resource, []*corev1.Namespace{namespace(global), namespace("team")},
		roleBinding(global, "org-viewers"))
	view := views.New(rolebindings, mux)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tests := []struct {
		name string
		call func() error
	}{
		{name: "Get", call: func() error { _, err := view.Get(ctx, "team", "org-viewers"); return err }},
		{name: "List", call: func() error { _, _, err := view.List(ctx, "team"); return err }},
		{name: "List all", call: func() error { _, _, err := view.List(ctx, ""); return err }},
		{name: "Watch", call: func() error {
			w, err := view.Watch(ctx, "team", registry.WatchRequest{})
			if err == nil {
				w.Stop()
			}
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !apierrors.IsServiceUnavailable(err) {
				t.Fatalf("err = %v, want 503 ServiceUnavailable", err)
			}
			if code := err.(apierrors.APIStatus).Status().Code; code != http.StatusServiceUnavailable {
				t.Errorf("code = %d, want %d", code, http.StatusServiceUnavailable)
			}
		})
	}

	mux.MarkSynced()
	got, err := view.Get(ctx, "team", "org-viewers")
	if err != nil {
		t.Fatalf("Get after MarkSynced: %v", err)
	}
	if s := summary(t, got); s != "org-viewers global implicit-global" {
		t.Errorf("Get after MarkSynced = %q", s)
	}
}

// fakeSource serves fixed merge results, or fails every call with err.
type fakeSource struct {
	results []merge.Result
	err     error
}

var _ views.Mux = fakeSource{}

func (f fakeSource) Read(fn func(watchmux.Reader)) (string, error) {
	if f.err != nil {
		return "", f.err
	}
	fn(fakeReader{results: f.results})
	return "1", nil
}

func (f fakeSource) Watch(context.Context, watchmux.WatchOptions) (watch.Interface, error) {
	if f.err != nil {
		return nil, f.err
	}
	return watch.NewEmptyWatch(), nil
}

// fakeReader holds the results of namespace "team". The reads the views
// make are its own; any other would panic on the nil Reader.
type fakeReader struct {
	watchmux.Reader
	results []merge.Result
}

func (r fakeReader) Results(_, namespace, name string) []merge.Result {
	var out []merge.Result
	for _, res := range r.results {
		if namespace == "team" && (name == "" || res.Item.Name == name) {
			out = append(out, res)
		}
	}
	return out
}

func (r fakeReader) Namespaces() []string { return []string{"team"} }

// Inherited implements watchmux.Reader: the fake has no local objects.
func (r fakeReader) Inherited(_, namespace, name string) (merge.Result, bool) {
	res := r.Results("", namespace, name)
	if len(res) == 0 {
		return merge.Result{}, false
	}
	return res[0], true
}

// TestViewSourceErrors checks that a source object that cannot be a view
// item is an error, not a panic and not an empty view, and that read errors
// pass through.
func TestViewSourceErrors(t *testing.T) {
	t.Parallel()
	errRead := errors.New("read failed")
	bad := func(obj any) fakeSource {
		return fakeSource{results: []merge.Result{{Item: merge.Item{Namespace: "team", Name: "bad", Object: obj}, Scope: merge.ScopeLocal}}}
	}
	sources := []struct {
		name   string
		source fakeSource
		// want checks the error; nil: any error but NotFound.
		want func(error) bool
	}{
		{name: "source object is no runtime.Object", source: bad("not an object")},
		{name: "source object without object metadata", source: bad(&metav1.Status{})},
		{name: "read error passes through", source: fakeSource{err: errRead}, want: func(err error) bool { return errors.Is(err, errRead) }},
	}
	for _, src := range sources {
		view := views.New(rolebindings, src.source)
		calls := []struct {
			name string
			call func() error
		}{
			{name: "Get", call: func() error { _, err := view.Get(context.Background(), "team", "bad"); return err }},
			{name: "List", call: func() error { _, _, err := view.List(context.Background(), "team"); return err }},
			{name: "List all", call: func() error { _, _, err := view.List(context.Background(), ""); return err }},
		}
		for _, c := range calls {
			t.Run(src.name+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				err := c.call()
				if src.want != nil {
					if !src.want(err) {
						t.Fatalf("err = %v, want the source's error", err)
					}
					return
				}
				if err == nil || apierrors.IsNotFound(err) {
					t.Fatalf("err = %v, want an error naming the bad source", err)
				}
			})
		}
	}
	t.Run("read error passes through Watch", func(t *testing.T) {
		t.Parallel()
		view := views.New(rolebindings, fakeSource{err: errRead})
		if _, err := view.Watch(context.Background(), "team", registry.WatchRequest{}); !errors.Is(err, errRead) {
			t.Fatalf("err = %v, want the source's error", err)
		}
	})
}

// nextEvent returns w's next event, failing the test if none comes.
func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed, want an event")
		}
		return ev
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("no watch event")
	}
	return watch.Event{}
}

// viewObject returns the view item of a watch event: watch events share
// their items (runtime.CacheableObject); this is a copy to read.
func viewObject(t *testing.T, obj runtime.Object) *rbacv1.RoleBinding {
	t.Helper()
	if c, ok := obj.(runtime.CacheableObject); ok {
		obj = c.GetObject()
	}
	rb, ok := obj.(*rbacv1.RoleBinding)
	if !ok {
		t.Fatalf("watch event object is a %T, want *rbacv1.RoleBinding", obj)
	}
	return rb
}

// watchWorld is a cluster of three namespaces that see one global
// RoleBinding, and team's local one.
func watchWorld() (*views.View, *watchmux.Mux) {
	return newView(rolebindings,
		[]*corev1.Namespace{namespace(global), namespace("team"), namespace("other")},
		roleBinding(global, "org-viewers"), roleBinding("team", "local"))
}

// changed returns a new version of a source RoleBinding, as an informer
// delivers it: a new object with a new resourceVersion.
func changed(namespace, name, rv string) *rbacv1.RoleBinding {
	rb := roleBinding(namespace, name)
	rb.ResourceVersion = rv
	rb.Subjects[0].Name = "changed"
	return rb
}

func TestViewWatch(t *testing.T) {
	t.Parallel()

	t.Run("from a list's version, a global update is a MODIFIED item of the viewing namespace", func(t *testing.T) {
		t.Parallel()
		view, mux := watchWorld()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, listRV, err := view.List(ctx, "team")
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		w, err := view.Watch(ctx, "team", registry.WatchRequest{ResourceVersion: listRV})
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		defer w.Stop()

		mux.OnSource(rolebindings.Resource, changed(global, "org-viewers", "8"), false)
		ev := nextEvent(t, w)
		if ev.Type != watch.Modified {
			t.Fatalf("event type = %s, want MODIFIED", ev.Type)
		}
		rb := viewObject(t, ev.Object)
		if rb.Namespace != "team" || rb.Name != "org-viewers" {
			t.Errorf("item = %s/%s, want team/org-viewers", rb.Namespace, rb.Name)
		}
		evRV := parseRV(t, rb.ResourceVersion)
		if evRV <= parseRV(t, listRV) || evRV > parseRV(t, currentRV(t, mux)) {
			t.Errorf("resourceVersion = %s, want the event's: after the list's %s, at most the mux's %s", rb.ResourceVersion, listRV, currentRV(t, mux))
		}
		if rb.Labels[v1alpha1.LabelScope] != string(merge.ScopeGlobal) || rb.Labels[v1alpha1.LabelSourceNamespace] != global {
			t.Errorf("labels = %v, want scope global from %s", rb.Labels, global)
		}
		if got, want := rb.Annotations[v1alpha1.AnnotationSourceResourceVersion], "8"; got != want {
			t.Errorf("%s = %q, want the new source version %q", v1alpha1.AnnotationSourceResourceVersion, got, want)
		}
		if got, want := rb.Annotations[v1alpha1.AnnotationSourceUID], string(sourceUID(global, "org-viewers")); got != want {
			t.Errorf("%s = %q, want %q", v1alpha1.AnnotationSourceUID, got, want)
		}
		if want := views.UID(sourceUID(global, "org-viewers"), "team"); rb.UID != want {
			t.Errorf("uid = %q, want the view's %q", rb.UID, want)
		}
		if rb.Subjects[0].Name != "changed" {
			t.Errorf("subjects = %v, want the updated source's", rb.Subjects)
		}

		t.Log("Only the viewing namespace's events: the next is team's own change")
		mux.OnSource(rolebindings.Resource, changed("team", "local", "9"), false)
		ev = nextEvent(t, w)
		if rb := viewObject(t, ev.Object); ev.Type != watch.Modified || rb.Namespace != "team" || rb.Name != "local" {
			t.Errorf("event = %s %s/%s, want MODIFIED team/local", ev.Type, rb.Namespace, rb.Name)
		}
	})

	t.Run("every namespace: one event per view, in version order", func(t *testing.T) {
		t.Parallel()
		view, mux := watchWorld()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, listRV, err := view.List(ctx, "")
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		w, err := view.Watch(ctx, "", registry.WatchRequest{ResourceVersion: listRV})
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		defer w.Stop()

		mux.OnSource(rolebindings.Resource, changed(global, "org-viewers", "8"), false)
		last := parseRV(t, listRV)
		got := map[string]string{}
		for range 3 {
			ev := nextEvent(t, w)
			rb := viewObject(t, ev.Object)
			if ev.Type != watch.Modified || rb.Name != "org-viewers" {
				t.Errorf("event = %s %s/%s, want MODIFIED org-viewers", ev.Type, rb.Namespace, rb.Name)
			}
			if rv := parseRV(t, rb.ResourceVersion); rv <= last {
				t.Errorf("event of %s at %d, not after %d", rb.Namespace, rv, last)
			} else {
				last = rv
			}
			got[rb.Namespace] = rb.Labels[v1alpha1.LabelScope]
		}
		want := map[string]string{global: "local", "team": "global", "other": "global"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("scope by viewing namespace = %v, want %v", got, want)
		}
		if cur := parseRV(t, currentRV(t, mux)); last != cur {
			t.Errorf("last event at %d, want the mux's %d", last, cur)
		}
	})

	// The first event after a global change, then a local one, shows
	// whether the watch kept the global one out.
	filters := []struct {
		name string
		req  registry.WatchRequest
	}{
		{name: "Name limits the watch to one item", req: registry.WatchRequest{Name: "local"}},
		{name: "Matches filters the view items", req: registry.WatchRequest{Matches: func(obj runtime.Object) bool {
			m, err := meta.Accessor(obj)
			return err == nil && m.GetLabels()[v1alpha1.LabelScope] == string(merge.ScopeLocal)
		}}},
	}
	for _, tt := range filters {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			view, mux := watchWorld()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := tt.req
			req.ResourceVersion = currentRV(t, mux)
			w, err := view.Watch(ctx, "team", req)
			if err != nil {
				t.Fatalf("Watch: %v", err)
			}
			defer w.Stop()
			mux.OnSource(rolebindings.Resource, changed(global, "org-viewers", "8"), false)
			mux.OnSource(rolebindings.Resource, changed("team", "local", "9"), false)
			ev := nextEvent(t, w)
			if rb := viewObject(t, ev.Object); ev.Type != watch.Modified || rb.Name != "local" {
				t.Errorf("first event = %s %s, want MODIFIED local", ev.Type, rb.Name)
			}
		})
	}

	t.Run("watch-list: the current items, then the initial-events-end bookmark", func(t *testing.T) {
		t.Parallel()
		view, mux := watchWorld()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		rv := currentRV(t, mux)
		w, err := view.Watch(ctx, "team", registry.WatchRequest{SendInitialEvents: ptr.To(true), AllowBookmarks: true})
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		defer w.Stop()
		for _, name := range []string{"local", "org-viewers"} {
			ev := nextEvent(t, w)
			rb := viewObject(t, ev.Object)
			if ev.Type != watch.Added || rb.Namespace != "team" || rb.Name != name || rb.ResourceVersion != rv {
				t.Errorf("event = %s %s/%s at %s, want ADDED team/%s at %s", ev.Type, rb.Namespace, rb.Name, rb.ResourceVersion, name, rv)
			}
		}
		ev := nextEvent(t, w)
		if ev.Type != watch.Bookmark {
			t.Fatalf("event type = %s, want BOOKMARK", ev.Type)
		}
		rb := viewObject(t, ev.Object)
		if rb.ResourceVersion != rv || rb.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
			t.Errorf("bookmark at %q with annotations %v, want %s with %s", rb.ResourceVersion, rb.Annotations, rv, metav1.InitialEventsAnnotationKey)
		}
	})

	t.Run("a version of another server instance is 410 Gone", func(t *testing.T) {
		t.Parallel()
		view, _ := watchWorld()
		w, err := view.Watch(context.Background(), "team", registry.WatchRequest{ResourceVersion: "1"})
		if !apierrors.IsResourceExpired(err) {
			if err == nil {
				w.Stop()
			}
			t.Fatalf("err = %v, want 410 Expired", err)
		}
	})
}

func TestObjects(t *testing.T) {
	t.Parallel()
	objs := views.NewObjects(newObject(), 0)

	t.Run("Empty returns an empty object of the resource", func(t *testing.T) {
		t.Parallel()
		for resource, newObj := range newObject() {
			got := objs.Empty(resource)
			if want := newObj(); !reflect.DeepEqual(got, want) {
				t.Errorf("Empty(%s) = %#v, want %#v", resource, got, want)
			}
			if objs.Empty(resource) == got {
				t.Errorf("Empty(%s) returned the same object twice", resource)
			}
		}
	})

	t.Run("Item is the view item at the event's version, shared by watchers", func(t *testing.T) {
		t.Parallel()
		src := roleBinding(global, "org-viewers")
		r := merge.Result{Item: merge.Item{Namespace: global, Name: "org-viewers", Object: src}, Scope: merge.ScopeGlobal}
		got, err := objs.Item(rolebindings.Resource, "team", r, "42")
		if err != nil {
			t.Fatalf("Item: %v", err)
		}
		rb := viewObject(t, got)
		want := rb.DeepCopy()
		if rb.Namespace != "team" || rb.ResourceVersion != "42" || rb.UID != views.UID(src.UID, "team") ||
			rb.Labels[v1alpha1.LabelScope] != "global" || rb.Labels[v1alpha1.LabelSourceNamespace] != global {
			t.Errorf("Item = %#v, want team's view at resourceVersion 42", rb)
		}
		again, err := objs.Item(rolebindings.Resource, "team", r, "42")
		if err != nil || again != got {
			t.Errorf("Item of the same event = %p, %v; want the shared %p", again, err, got)
		}
		rb.Labels["scribbled"] = "yes"
		if fresh := viewObject(t, again); !apiequality.Semantic.DeepEqual(fresh, want) {
			t.Errorf("after a reader changed its copy, Item = %#v, want %#v", fresh, want)
		}
	})
}
