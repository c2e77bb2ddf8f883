package materialize

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/kinds"
)

// TestRun follows the views: copies appear in every tenant, follow a source
// change, go when the source goes, and a copy deleted behind the guards
// comes back; Run stops with its context and leaves no goroutine (goleak).
func TestRun(t *testing.T) {
	host := newFakeHost(t)
	mux := newMux(false, sources()...)
	m := New(mux, host, []kinds.Kind{npKind}, nil, Options{Workers: 2})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()

	waitFor := func(what string, ok func() error) {
		t.Helper()
		testwait.Within(t, 20*time.Millisecond, 10*time.Second, what, func(context.Context) error { return ok() })
	}
	app := func(ns, name string) string {
		o := host.objects(t, ns)[name]
		if o == nil {
			return ""
		}
		copies, _ := describeCopies(t, host.objects(t, ns))
		return copies[name].app
	}

	t.Log("every tenant gets the global default-deny; team-a gets org's web, team-b the global one")
	waitFor("copies in the tenants", func() error {
		for _, c := range []struct{ ns, name, app string }{
			{"team-a", "default-deny", "all"}, {"team-b", "default-deny", "all"}, {"org", "default-deny", "all"},
			{"team-a", "web", "org-web"}, {"team-b", "web", "global-web"},
		} {
			if got := app(c.ns, c.name); got != c.app {
				return fmt.Errorf("%s/%s selects %q, want %q", c.ns, c.name, got, c.app)
			}
		}
		return nil
	})
	if n := len(host.objects(t, "kube-system")); n != 0 {
		t.Errorf("kube-system holds %d NetworkPolicies, want none", n)
	}

	t.Log("the global default-deny changes: every copy follows")
	mux.OnSource("networkpolicies", netpol(global, "default-deny", "changed", "20"), false)
	waitFor("copies follow the change", func() error {
		for _, ns := range []string{"team-a", "team-b", "org"} {
			if got := app(ns, "default-deny"); got != "changed" {
				return fmt.Errorf("%s/default-deny selects %q", ns, got)
			}
		}
		return nil
	})

	t.Log("a copy deleted behind the guards comes back")
	if err := host.Tracker().Delete(npGVR, "team-b", "default-deny"); err != nil {
		t.Fatal(err)
	}
	waitFor("the deleted copy is back", func() error {
		if got := app("team-b", "default-deny"); got != "changed" {
			return fmt.Errorf("team-b/default-deny selects %q", got)
		}
		return nil
	})

	t.Log("the source is deleted: every copy goes")
	mux.OnSource("networkpolicies", netpol(global, "default-deny", "changed", "20"), true)
	waitFor("copies deleted", func() error {
		for _, ns := range []string{"team-a", "team-b", "org"} {
			if o := host.objects(t, ns)["default-deny"]; o != nil {
				return fmt.Errorf("%s/default-deny still exists", ns)
			}
		}
		return nil
	})
	if got := app("team-a", "mine"); got != "" {
		t.Errorf("team-a's own policy was copied over: %q", got)
	}
}

// TestCopyEchoIsNotDrift: the copies' informer showing back the
// materializer's own write queues nothing (it would count the namespace as
// pending once more); any other version of a copy, or its deletion, queues
// its namespace for the drift check.
func TestCopyEchoIsNotDrift(t *testing.T) {
	m := New(newMux(false, sources()...), newFakeHost(t), []kinds.Kind{npKind}, nil, Options{})
	r := &run{m: m, queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	defer r.queue.ShutDown()
	h := r.copyHandler(npKind)
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(staleCopy("team-a", global, "default-deny", "all", "7"))
	if err != nil {
		t.Fatal(err)
	}
	written := &unstructured.Unstructured{Object: content}
	written.SetResourceVersion("41")
	m.remember(npKind, written)

	h.OnAdd(written, false)
	if n := r.queue.Len(); n != 0 || len(m.dirty) != 0 {
		t.Errorf("the echo of the materializer's own write queued %d namespaces (dirty %v), want none", n, m.dirty)
	}
	for _, tc := range []struct {
		name   string
		notify func()
	}{
		{name: "a version the materializer did not write", notify: func() {
			changed := written.DeepCopy()
			changed.SetResourceVersion("42")
			h.OnUpdate(written, changed)
		}},
		{name: "deleted", notify: func() { h.OnDelete(written) }},
	} {
		tc.notify()
		if n := r.queue.Len(); n != 1 {
			t.Fatalf("%s: %d namespaces queued, want team-a", tc.name, n)
		}
		ns, _ := r.queue.Get()
		r.queue.Done(ns)
		r.queue.Forget(ns)
		if ns != "team-a" {
			t.Errorf("%s: queued %q, want team-a", tc.name, ns)
		}
		delete(m.dirty, ns)
	}
}

// TestCopyEchoBeforeTheWriteReturns: the copies' informer often shows a
// write's result before the write returns. That echo queues nothing; a
// version of someone else's shown while the write is under way queues the
// namespace once the write returns.
func TestCopyEchoBeforeTheWriteReturns(t *testing.T) {
	m := New(newMux(false, sources()...), newFakeHost(t), []kinds.Kind{npKind}, nil, Options{})
	r := &run{m: m, queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())}
	defer r.queue.ShutDown()
	m.requeue = r.enqueue
	h := r.copyHandler(npKind)
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(staleCopy("team-a", global, "default-deny", "all", "7"))
	if err != nil {
		t.Fatal(err)
	}
	key := copyKey{"networkpolicies", "team-a", "default-deny"}
	at := func(rv string) *unstructured.Unstructured {
		u := (&unstructured.Unstructured{Object: content}).DeepCopy()
		u.SetResourceVersion(rv)
		return u
	}

	m.begin(key)
	h.OnAdd(at("41"), false) // the write's own result, shown first
	m.remember(npKind, at("41"))
	m.end(key)
	if n := r.queue.Len(); n != 0 || len(m.dirty) != 0 {
		t.Errorf("the echo shown before the write returned queued %d namespaces (dirty %v), want none", n, m.dirty)
	}

	m.begin(key)
	h.OnUpdate(at("41"), at("42")) // an earlier version, then the write's own: the write is the last
	h.OnUpdate(at("42"), at("43"))
	m.remember(npKind, at("43"))
	m.end(key)
	if n := r.queue.Len(); n != 0 {
		t.Errorf("%d namespaces queued for a version followed by the write's own, want none", n)
	}

	m.begin(key)
	h.OnUpdate(at("43"), at("44")) // the write fails; 44 is someone else's
	m.end(key)
	if n := r.queue.Len(); n != 1 {
		t.Fatalf("%d namespaces queued for a version of someone else's, want team-a", n)
	}
	if ns, _ := r.queue.Get(); ns != "team-a" {
		t.Errorf("queued %q, want team-a", ns)
	}
}
