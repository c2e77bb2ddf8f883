package integration

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// TestWatchesSharingConnectionsGetEveryEvent opens 45 client-go watches of
// views through kube-apiserver (its aggregator carries them on HTTP/2
// connections of 20 streams to implicit-apiserver, whose connections hold
// their writes while a change's events are on their way: pkg/wirehold),
// edits their parent's RoleBinding 8 times in a row, and checks that every
// watch gets every MODIFIED, in order, with increasing versions, its
// bookmarks never ahead of them, and ends cleanly when the server ends it
// (its timeoutSeconds: the stream ends without an ERROR event).
func TestWatchesSharingConnectionsGetEveryEvent(t *testing.T) {
	const children, edits = 45, 8
	kube, dyn := admin(t)
	createNamespace(t, kube, "wc-org", nil, nil)
	var namespaces []string
	for i := range children {
		ns := fmt.Sprintf("wc-%02d", i)
		createNamespace(t, kube, ns, map[string]string{"implicit.dev/parent": "wc-org"}, nil)
		namespaces = append(namespaces, ns)
	}
	createRoleBinding(t, kube, "wc-org", "wc-inherited", "view", "wc:devs")
	for _, ns := range namespaces {
		waitForView(t, dyn, viewRoleBindings, ns, "wc-", map[string]viewItem{"wc-inherited": {Scope: "parent", Source: "wc-org"}})
	}

	// Long enough for the edits below; then the server ends each watch.
	const timeout = 20
	t.Logf("%d watches, one per child's view, with bookmarks, ended by the server after %ds", children, timeout)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	watches := make([]watch.Interface, children)
	for i, ns := range namespaces {
		list, err := dyn.Resource(viewRoleBindings).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := dyn.Resource(viewRoleBindings).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion(), AllowWatchBookmarks: true, TimeoutSeconds: ptr.To(int64(timeout))})
		if err != nil {
			t.Fatal(err)
		}
		watches[i] = w
	}

	t.Logf("editing wc-org/wc-inherited %d times in a row, then adding wc-org/wc-end", edits)
	for e := 1; e <= edits; e++ {
		if err := patchRoleBinding(ctx, kube, "wc-org", "wc-inherited", map[string]any{"metadata": map[string]any{"labels": map[string]string{"wc-edit": strconv.Itoa(e)}}}); err != nil {
			t.Fatal(err)
		}
	}
	createRoleBinding(t, kube, "wc-org", "wc-end", "view", "wc:sentinel")

	for i, w := range watches {
		got := readUntil(t, w, "ADDED wc-end in "+namespaces[i], func(e watch.Event) bool { return e.Type == watch.Added && nameOf(e) == "wc-end" })
		var last uint64
		next := 1
		for _, e := range got {
			m, err := meta.Accessor(e.Object)
			if err != nil {
				t.Fatal(err)
			}
			rv := mustParseRV(t, namespaces[i]+"'s "+describeEvent(e), m.GetResourceVersion())
			if rv < last || (rv == last && e.Type != watch.Bookmark) {
				t.Errorf("%s: %s at version %d after %d", namespaces[i], describeEvent(e), rv, last)
			}
			last = rv
			switch {
			case e.Type == watch.Bookmark:
			case e.Type == watch.Modified && nameOf(e) == "wc-inherited":
				if got := m.GetLabels()["wc-edit"]; got != strconv.Itoa(next) {
					t.Errorf("%s: MODIFIED wc-inherited with wc-edit=%s, want %d", namespaces[i], got, next)
				}
				next++
			case e.Type == watch.Added && nameOf(e) == "wc-end":
			default:
				t.Errorf("%s: unexpected %s", namespaces[i], describeEvent(e))
			}
		}
		if next != edits+1 {
			t.Errorf("%s: %d MODIFIED wc-inherited, want %d (%s)", namespaces[i], next-1, edits, describeEvents(got))
		}
	}

	t.Log("the server ends every watch at its timeout: each result channel ends, without an ERROR")
	for i, w := range watches {
		timer := time.NewTimer(timeout*time.Second + converge)
	drain:
		for {
			select {
			case e, ok := <-w.ResultChan():
				if !ok {
					break drain
				}
				switch {
				case e.Type == watch.Error:
					t.Errorf("%s: ERROR %v before the end", namespaces[i], apierrors.FromObject(e.Object))
				case e.Type != watch.Bookmark:
					t.Errorf("%s: unexpected %s after the sentinel", namespaces[i], describeEvent(e))
				}
			case <-timer.C:
				t.Fatalf("%s: the watch did not end within %s of its timeout", namespaces[i], converge)
			}
		}
		timer.Stop()
	}
}
