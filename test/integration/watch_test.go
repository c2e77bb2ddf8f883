package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// The watch tests drive view watches through the aggregator with kubectl
// and client-go. To tell "exactly these events" from "these events so far",
// each test ends a sequence of changes with a sentinel change of a
// RoleBinding: source RoleBindings reach implicit-apiserver through one
// informer, in kube-apiserver's order, and a watch delivers view events in
// resourceVersion order, so once the sentinel's event is read, every event
// of the changes before it has been read too.

// TestWatchGlobalEditFansOut edits one global RoleBinding and checks, with
// `kubectl get -A -w` and with a client-go watch, that every view holding it
// gets exactly one MODIFIED and no other view gets any event.
func TestWatchGlobalEditFansOut(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	waitNoTerminatingNamespaces(t, kube)

	t.Log("hierarchy: wt-org <- wt-a, wt-b; wt-excl excludes rolebindings/wt-global; wt-shadow has a local wt-global")
	createNamespace(t, kube, "wt-org", nil, nil)
	createNamespace(t, kube, "wt-a", map[string]string{"implicit.dev/parent": "wt-org"}, nil)
	createNamespace(t, kube, "wt-b", map[string]string{"implicit.dev/parent": "wt-org"}, nil)
	createNamespace(t, kube, "wt-excl", nil, map[string]string{"implicit.dev/exclude": "rolebindings/wt-global"})
	createNamespace(t, kube, "wt-shadow", nil, nil)
	createRoleBinding(t, kube, "wt-shadow", "wt-global", "edit", "shadow:devs")
	createRoleBinding(t, kube, globalNS, "wt-global", "view", "org:viewers")
	t.Log("wt-org/wt-sentinel marks the start and the end of the events to check")
	createRoleBinding(t, kube, "wt-org", "wt-sentinel", "view", "wt:sentinel")

	g := viewItem{Scope: "global", Source: globalNS}
	org := viewItem{Scope: "parent", Source: "wt-org"}
	for _, ns := range []string{"wt-a", "wt-b"} {
		waitForView(t, dyn, viewRoleBindings, ns, "wt-", map[string]viewItem{"wt-global": g, "wt-sentinel": org})
	}
	waitForView(t, dyn, viewRoleBindings, "wt-org", "wt-", map[string]viewItem{"wt-global": g, "wt-sentinel": {Scope: "local", Source: "wt-org"}})
	waitForView(t, dyn, viewRoleBindings, "wt-excl", "wt-", map[string]viewItem{})
	waitForView(t, dyn, viewRoleBindings, "wt-shadow", "wt-", map[string]viewItem{"wt-global": {Scope: "local", Source: "wt-shadow"}})
	waitForView(t, dyn, viewRoleBindings, globalNS, "wt-", map[string]viewItem{"wt-global": {Scope: "local", Source: globalNS}})

	want, lenient := expectedHolders(t, kube, "rolebindings", "wt-global")
	t.Logf("views holding the global wt-global (expect one MODIFIED each): %s", strings.Join(sortedKeys(want), " "))
	if len(lenient) > 0 {
		t.Logf("terminating namespaces, checked leniently: %s", strings.Join(sortedKeys(lenient), " "))
	}
	for _, ns := range []string{"wt-org", "wt-a", "wt-b", globalNS} {
		if !want[ns] {
			t.Fatalf("test bug: %s missing from the expected views", ns)
		}
	}
	for _, ns := range []string{"wt-excl", "wt-shadow"} {
		if want[ns] {
			t.Fatalf("test bug: %s among the expected views", ns)
		}
	}
	t.Log("cross-check with the server's answer to \"who sees this global object?\"")
	eventually(t, "the server's holders of wt-global match the expected views", func(ctx context.Context) error {
		got, err := globalHolders(ctx, dyn, "wt-global")
		if err != nil {
			return err
		}
		for ns := range lenient {
			delete(got, ns)
		}
		exp := map[string]bool{}
		for ns := range want {
			exp[ns] = true
		}
		if a, b := strings.Join(sortedKeys(got), " "), strings.Join(sortedKeys(exp), " "); a != b {
			return fmt.Errorf("server lists wt-global as global in\n %s\nwant\n %s", a, b)
		}
		return nil
	})

	t.Log("kubectl get rolebindings.implicit.dev -A --watch-only --output-watch-events -o json, in the background")
	kw := startKubectlWatch(t, "get", "rolebindings.implicit.dev", "-A", "--watch-only", "--output-watch-events", "-o", "json")
	tick := 0
	eventually(t, "kubectl's watch sees the start sentinel", func(ctx context.Context) error {
		tick++
		if err := patchRoleBinding(ctx, kube, "wt-org", "wt-sentinel", map[string]any{"metadata": map[string]any{"labels": map[string]string{"wt-tick": strconv.Itoa(tick)}}}); err != nil {
			return err
		}
		if kw.find(func(e kubectlEvent) bool { return e.Namespace == "wt-org" && e.Name == "wt-sentinel" }) < 0 {
			return fmt.Errorf("no event for wt-org/wt-sentinel yet (kubectl stderr: %s)", kw.stderrText())
		}
		return nil
	})
	from := kw.len()
	t.Logf("kubectl's watch is live after %d sentinel edit(s)", tick)

	t.Log("editing the global wt-global once (label wt-edit=1), then the end sentinel")
	edited, err := kube.RbacV1().RoleBindings(globalNS).Patch(t.Context(), "wt-global", types.MergePatchType, []byte(`{"metadata":{"labels":{"wt-edit":"1"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := patchRoleBinding(t.Context(), kube, "wt-org", "wt-sentinel", map[string]any{"metadata": map[string]any{"labels": map[string]string{"wt-phase": "end"}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "kubectl's watch sees the end sentinel", func(ctx context.Context) error {
		if kw.find(func(e kubectlEvent) bool {
			return e.Namespace == "wt-org" && e.Name == "wt-sentinel" && e.Labels["wt-phase"] == "end"
		}) < 0 {
			return fmt.Errorf("no end sentinel yet (kubectl stderr: %s)", kw.stderrText())
		}
		return nil
	})
	events := kw.stop(t)[from:]

	t.Log("checking kubectl's events for wt-global")
	perNS := map[string][]kubectlEvent{}
	for _, e := range events {
		if e.Name == "wt-global" {
			perNS[e.Namespace] = append(perNS[e.Namespace], e)
		}
	}
	t.Logf("kubectl printed %d events, %d for wt-global in %d namespaces", len(events), countEvents(perNS), len(perNS))
	for ns := range want {
		evs := perNS[ns]
		if len(evs) != 1 || evs[0].Type != "MODIFIED" {
			t.Errorf("view of %s: events for wt-global %v, want exactly one MODIFIED", ns, evs)
			continue
		}
		e := evs[0]
		wantScope := "global"
		if ns == globalNS {
			wantScope = "local"
		}
		if e.Labels["wt-edit"] != "1" || e.Labels["implicit.dev/scope"] != wantScope ||
			e.Annotations["implicit.dev/source-resource-version"] != edited.ResourceVersion {
			t.Errorf("view of %s: MODIFIED wt-global has labels %v, source-resource-version %q; want wt-edit=1, scope %s, source-resource-version %s",
				ns, e.Labels, e.Annotations["implicit.dev/source-resource-version"], wantScope, edited.ResourceVersion)
		}
	}
	for ns, evs := range perNS {
		if want[ns] {
			continue
		}
		if lenient[ns] {
			t.Logf("terminating %s: events for wt-global %v", ns, evs)
			continue
		}
		t.Errorf("view of %s does not hold the global wt-global, yet got events %v", ns, evs)
	}
	if evs := perNS["wt-excl"]; len(evs) == 0 {
		t.Log("wt-excl (excludes wt-global): no event, as it should")
	}
	if evs := perNS["wt-shadow"]; len(evs) == 0 {
		t.Log("wt-shadow (its local wt-global wins): no event, as it should")
	}

	t.Log("client-go: watch wt-a's view from a list's resourceVersion, then edit wt-global again")
	list, err := dyn.Resource(viewRoleBindings).Namespace("wt-a").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	listRV := mustParseRV(t, "list", list.GetResourceVersion())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w, err := dyn.Resource(viewRoleBindings).Namespace("wt-a").Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := kube.RbacV1().RoleBindings(globalNS).Patch(t.Context(), "wt-global", types.MergePatchType, []byte(`{"metadata":{"labels":{"wt-edit":"2"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	createRoleBinding(t, kube, "wt-a", "wt-a-end", "view", "wt:sentinel")
	got := readUntil(t, w, "ADDED wt-a/wt-a-end", func(e watch.Event) bool { return e.Type == watch.Added && nameOf(e) == "wt-a-end" })
	t.Logf("wt-a's watch: %s", describeEvents(got))
	var modified []watch.Event
	for _, e := range got {
		switch {
		case nameOf(e) == "wt-global" && e.Type == watch.Modified:
			modified = append(modified, e)
		case nameOf(e) == "wt-a-end" && e.Type == watch.Added:
		default:
			t.Errorf("unexpected event in wt-a's watch: %s", describeEvent(e))
		}
	}
	if len(modified) != 1 {
		t.Fatalf("wt-a's watch: %d MODIFIED wt-global, want exactly one", len(modified))
	}
	m, _ := meta.Accessor(modified[0].Object)
	if m.GetLabels()["wt-edit"] != "2" {
		t.Errorf("MODIFIED wt-global in wt-a has labels %v, want wt-edit=2", m.GetLabels())
	}
	rv := mustParseRV(t, "MODIFIED wt-global's", m.GetResourceVersion())
	switch {
	case rv <= listRV:
		t.Errorf("MODIFIED wt-global's resourceVersion %d is not greater than the list's %d", rv, listRV)
	default:
		t.Logf("resourceVersions: list %d < event %d", listRV, rv)
	}
}

// TestWatchReparent moves a namespace to another parent: its view's watch
// must lose the old parent's items and gain the new one's, nothing else.
func TestWatchReparent(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	t.Log("wt-p1 holds wt-p1-rb, wt-p2 holds wt-p2-rb; wt-child has parent wt-p1")
	createNamespace(t, kube, "wt-p1", nil, nil)
	createNamespace(t, kube, "wt-p2", nil, nil)
	createRoleBinding(t, kube, "wt-p1", "wt-p1-rb", "view", "p1:viewers")
	createRoleBinding(t, kube, "wt-p2", "wt-p2-rb", "view", "p2:viewers")
	createNamespace(t, kube, "wt-child", map[string]string{"implicit.dev/parent": "wt-p1"}, nil)
	waitForView(t, dyn, viewRoleBindings, "wt-child", "wt-", map[string]viewItem{"wt-p1-rb": {Scope: "parent", Source: "wt-p1"}})

	list, err := dyn.Resource(viewRoleBindings).Namespace("wt-child").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("watching wt-child's view from the list's resourceVersion %s", list.GetResourceVersion())
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w, err := dyn.Resource(viewRoleBindings).Namespace("wt-child").Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	t.Log("relabelling wt-child: implicit.dev/parent=wt-p2")
	if _, err := kube.CoreV1().Namespaces().Patch(t.Context(), "wt-child", types.MergePatchType, []byte(`{"metadata":{"labels":{"implicit.dev/parent":"wt-p2"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	got := readUntil(t, w, "DELETED wt-p1-rb and ADDED wt-p2-rb", func(e watch.Event) bool {
		seen[string(e.Type)+" "+nameOf(e)] = true
		return seen["DELETED wt-p1-rb"] && seen["ADDED wt-p2-rb"]
	})
	// Namespaces and RoleBindings come through different informers: the
	// sentinel is created only once the relabel's events are read.
	t.Log("both seen; a local sentinel wt-child-end marks the end")
	createRoleBinding(t, kube, "wt-child", "wt-child-end", "view", "wt:sentinel")
	got = append(got, readUntil(t, w, "ADDED wt-child-end", func(e watch.Event) bool { return e.Type == watch.Added && nameOf(e) == "wt-child-end" })...)
	t.Logf("wt-child's watch: %s", describeEvents(got))

	var wt []string
	for _, e := range got {
		if strings.HasPrefix(nameOf(e), "wt-") {
			wt = append(wt, string(e.Type)+" "+nameOf(e))
		} else {
			t.Errorf("event for an item the relabel does not touch: %s", describeEvent(e))
		}
	}
	sort.Strings(wt)
	if want := "ADDED wt-child-end, ADDED wt-p2-rb, DELETED wt-p1-rb"; strings.Join(wt, ", ") != want {
		t.Errorf("wt- events: %s\nwant exactly: %s", strings.Join(wt, ", "), want)
	}
	for _, e := range got {
		if e.Type == watch.Added && nameOf(e) == "wt-p2-rb" {
			m, _ := meta.Accessor(e.Object)
			if m.GetNamespace() != "wt-child" || m.GetLabels()["implicit.dev/scope"] != "parent" || m.GetLabels()["implicit.dev/source-namespace"] != "wt-p2" {
				t.Errorf("ADDED wt-p2-rb: namespace %s labels %v, want wt-child, scope parent from wt-p2", m.GetNamespace(), m.GetLabels())
			}
		}
	}
	waitForView(t, dyn, viewRoleBindings, "wt-child", "wt-", map[string]viewItem{
		"wt-p2-rb":     {Scope: "parent", Source: "wt-p2"},
		"wt-child-end": {Scope: "local", Source: "wt-child"},
	})
}

// TestInformerConverges runs a client-go dynamic informer on the views while
// a burst of source, hierarchy, exclusion and lock changes lands; its store
// must end up equal to a fresh list.
func TestInformerConverges(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	t.Log("hierarchy: wt-inf-org <- wt-inf-a <- wt-inf-d; wt-inf-org <- wt-inf-b; wt-inf-c, no parent yet")
	createNamespace(t, kube, "wt-inf-org", nil, nil)
	createNamespace(t, kube, "wt-inf-a", map[string]string{"implicit.dev/parent": "wt-inf-org"}, nil)
	createNamespace(t, kube, "wt-inf-b", map[string]string{"implicit.dev/parent": "wt-inf-org"}, nil)
	createNamespace(t, kube, "wt-inf-c", nil, nil)
	createNamespace(t, kube, "wt-inf-d", map[string]string{"implicit.dev/parent": "wt-inf-a"}, nil)
	createRoleBinding(t, kube, "wt-inf-a", "wt-inf-seed", "view", "seed")
	waitForView(t, dyn, viewRoleBindings, "wt-inf-d", "wt-inf-", map[string]viewItem{"wt-inf-seed": {Scope: "parent", Source: "wt-inf-a"}})

	keep := func(ns, name string) bool {
		return strings.HasPrefix(ns, "wt-inf-") || (ns == globalNS && strings.HasPrefix(name, "wt-inf-"))
	}
	store, watchErrs := startInformer(t, dyn, metav1.NamespaceAll)
	waitConverged(t, dyn, store, metav1.NamespaceAll, keep, "before the burst")

	t.Log("a burst of edits: creates, updates, deletes of global, parent and local sources, exclusions, a lock, reparenting")
	start := time.Now()
	n := 0
	rb := func(ns, name string) { n++; createRoleBinding(t, kube, ns, name, "view", "burst") }
	patchRB := func(ns, name string, patch map[string]any) {
		n++
		if err := patchRoleBinding(t.Context(), kube, ns, name, patch); err != nil {
			t.Fatal(err)
		}
	}
	label := func(k, v string) map[string]any {
		return map[string]any{"metadata": map[string]any{"labels": map[string]string{k: v}}}
	}
	del := func(ns, name string) {
		n++
		if err := kube.RbacV1().RoleBindings(ns).Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	patchNS := func(name string, patch map[string]any) {
		n++
		b, _ := json.Marshal(patch)
		if _, err := kube.CoreV1().Namespaces().Patch(t.Context(), name, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 4; i++ {
		rb(globalNS, fmt.Sprintf("wt-inf-g%d", i))
	}
	for i := 1; i <= 3; i++ {
		rb("wt-inf-org", fmt.Sprintf("wt-inf-p%d", i))
	}
	rb("wt-inf-a", "wt-inf-g1") // shadows the global wt-inf-g1 in wt-inf-a and wt-inf-d
	rb("wt-inf-d", "wt-inf-l1")
	for i := 1; i <= 4; i++ {
		patchRB(globalNS, fmt.Sprintf("wt-inf-g%d", i), label("rev", "1"))
	}
	patchNS("wt-inf-b", map[string]any{"metadata": map[string]any{"annotations": map[string]string{"implicit.dev/exclude": "rolebindings/wt-inf-g2"}}})
	patchRB(globalNS, "wt-inf-g3", map[string]any{"metadata": map[string]any{"annotations": map[string]string{"implicit.dev/locked": "true"}}})
	patchNS("wt-inf-c", map[string]any{"metadata": map[string]any{"labels": map[string]string{"implicit.dev/parent": "wt-inf-org"}}})
	del("wt-inf-org", "wt-inf-p2")
	del(globalNS, "wt-inf-g4")
	patchNS("wt-inf-b", map[string]any{"metadata": map[string]any{"annotations": map[string]string{"implicit.dev/exclude": "rolebindings/*"}}})
	rb("wt-inf-org", "wt-inf-g2") // a parent shadow of the global wt-inf-g2
	del("wt-inf-a", "wt-inf-g1")  // the global wt-inf-g1 is back in wt-inf-a and wt-inf-d
	patchNS("wt-inf-d", map[string]any{"metadata": map[string]any{"labels": map[string]string{"implicit.dev/parent": "wt-inf-b"}}})
	for i := 0; i < 10; i++ {
		patchRB(globalNS, "wt-inf-g1", label("rev", strconv.Itoa(i+2)))
		patchRB("wt-inf-org", "wt-inf-p1", label("rev", strconv.Itoa(i+2)))
		patchRB("wt-inf-d", "wt-inf-l1", label("rev", strconv.Itoa(i+2)))
	}
	t.Logf("%d edits in %s", n, time.Since(start).Round(time.Millisecond))

	final := waitConverged(t, dyn, store, metav1.NamespaceAll, keep, "after the burst")
	t.Log("spot checks of the converged state")
	for key, want := range map[string]string{
		"wt-inf-a/wt-inf-g1":   "global|" + globalNS,
		"wt-inf-a/wt-inf-g2":   "parent|wt-inf-org",
		"wt-inf-c/wt-inf-p1":   "parent|wt-inf-org",
		"wt-inf-a/wt-inf-p3":   "parent|wt-inf-org",
		"wt-inf-d/wt-inf-l1":   "local|wt-inf-d",
		"wt-inf-b/wt-inf-g3":   "global|" + globalNS, // locked: kept despite rolebindings/*
		"wt-inf-d/wt-inf-g3":   "global|" + globalNS, // below wt-inf-b now: the same
		"wt-inf-org/wt-inf-g2": "local|wt-inf-org",
	} {
		if got := final[key]; !strings.HasPrefix(got, want+"|") {
			t.Errorf("%s: %q, want %s", key, got, want)
		}
	}
	// wt-inf-b excludes rolebindings/*: it and wt-inf-d, now below it, keep
	// only their own items and the locked wt-inf-g3.
	for _, key := range []string{"wt-inf-b/wt-inf-g1", "wt-inf-b/wt-inf-p1", "wt-inf-d/wt-inf-g1", "wt-inf-d/wt-inf-p3", "wt-inf-a/wt-inf-p2", "wt-inf-a/wt-inf-g4"} {
		if got, ok := final[key]; ok {
			t.Errorf("%s: %q, want no such item", key, got)
		}
	}
	// Nothing here expires a resourceVersion or breaks a watch: the informer
	// must have followed the burst through its watch, never relisting.
	if errs := watchErrs(); len(errs) > 0 {
		t.Errorf("the informer met watch errors (it relisted): %v", errs)
	}
}

// TestWatchAfterRestart restarts implicit-apiserver under a running informer
// and an open watch: a version names an upstream state, not a run (issue
// 31), so a watch from the earlier run's resourceVersion is served by the
// new run, from that state on, with every change after it; and the
// informer converges.
func TestWatchAfterRestart(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	t.Cleanup(func() { ensureImplicitRunning(t) })

	createNamespace(t, kube, "wt-rs", nil, nil)
	createRoleBinding(t, kube, "wt-rs", "wt-rs-1", "view", "rs:viewers")
	waitForView(t, dyn, viewRoleBindings, "wt-rs", "wt-rs-", map[string]viewItem{"wt-rs-1": {Scope: "local", Source: "wt-rs"}})

	keep := func(ns, name string) bool { return ns == "wt-rs" }
	store, watchErrs := startInformer(t, dyn, "wt-rs")
	waitConverged(t, dyn, store, "wt-rs", keep, "before the restart")

	list, err := dyn.Resource(viewRoleBindings).Namespace("wt-rs").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldRV := list.GetResourceVersion()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w, err := dyn.Resource(viewRoleBindings).Namespace("wt-rs").Watch(ctx, metav1.ListOptions{ResourceVersion: oldRV})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	t.Logf("restarting implicit-apiserver (list resourceVersion before: %s)", oldRV)
	start := time.Now()
	// The new run must outlive this test: other tests share it.
	if err := implicit.Restart(context.Background()); err != nil {
		t.Fatalf("restarting implicit-apiserver: %v\n%s", err, implicit.LogTail(40))
	}
	if err := cp.WaitAPIServiceAvailable(t.Context()); err != nil {
		t.Fatal(err)
	}
	eventually(t, "kube-apiserver /readyz", func(ctx context.Context) error {
		_, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
	eventually(t, "listing wt-rs's view through the aggregator", func(ctx context.Context) error {
		_, err := dyn.Resource(viewRoleBindings).Namespace("wt-rs").List(ctx, metav1.ListOptions{})
		return err
	})
	t.Logf("implicit-apiserver restarted and Available again in %s", time.Since(start).Round(time.Millisecond))

	t.Log("the watch opened before the restart has ended")
	ended := time.NewTimer(converge)
	defer ended.Stop()
drain:
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				break drain
			}
			t.Logf("old watch: %s", describeEvent(e))
		case <-ended.C:
			t.Fatalf("the watch opened before the restart still runs %s after it", converge)
		}
	}

	t.Logf("a watch from the earlier run's resourceVersion %s is served by the new run", oldRV)
	var resumed watch.Interface
	eventually(t, "a watch from the earlier run's resourceVersion", func(ctx context.Context) error {
		w, err := dyn.Resource(viewRoleBindings).Namespace("wt-rs").Watch(t.Context(), metav1.ListOptions{ResourceVersion: oldRV})
		switch {
		case err == nil:
			resumed = w
			return nil
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
			t.Fatalf("the earlier run's resourceVersion %s answered 410: %v", oldRV, err)
		}
		return err // e.g. 503 while the aggregator catches up: try again
	})
	defer resumed.Stop()

	t.Log("an edit after the restart: the resumed watch and the informer both see it")
	createRoleBinding(t, kube, "wt-rs", "wt-rs-2", "edit", "rs:editors")
	if err := patchRoleBinding(t.Context(), kube, "wt-rs", "wt-rs-1", map[string]any{"metadata": map[string]any{"labels": map[string]string{"after": "restart"}}}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	deadline := time.NewTimer(converge)
	defer deadline.Stop()
	for !seen["ADDED wt-rs-2"] || !seen["MODIFIED wt-rs-1"] {
		select {
		case e, ok := <-resumed.ResultChan():
			if !ok {
				t.Fatalf("the resumed watch ended; seen %v", seen)
			}
			if e.Type == watch.Error {
				t.Fatalf("the resumed watch: %s", describeEvent(e))
			}
			if e.Type == watch.Bookmark {
				continue
			}
			m, err := meta.Accessor(e.Object)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("resumed watch: %s", describeEvent(e))
			seen[string(e.Type)+" "+m.GetName()] = true
			if e.Type == watch.Deleted || (e.Type == watch.Added && m.GetName() == "wt-rs-1") {
				t.Errorf("the resumed watch sent %s: nothing of the kind happened after its version", describeEvent(e))
			}
		case <-deadline.C:
			t.Fatalf("the resumed watch saw %v within %s, want ADDED wt-rs-2 and MODIFIED wt-rs-1", seen, converge)
		}
	}
	final := waitConverged(t, dyn, store, "wt-rs", keep, "after the restart")
	if _, ok := final["wt-rs/wt-rs-2"]; !ok {
		t.Errorf("converged without wt-rs-2: %v", final)
	}
	newList, err := dyn.Resource(viewRoleBindings).Namespace("wt-rs").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if newList.GetResourceVersion() == oldRV {
		t.Errorf("the new run's list has the earlier run's resourceVersion %s", oldRV)
	}
	t.Logf("list resourceVersion after the restart: %s; the informer's watch errors: %v", newList.GetResourceVersion(), watchErrs())
}

// TestWatchList asks for a watch-list stream (sendInitialEvents=true): the
// current items as ADDED, then a bookmark marking the end of them.
func TestWatchList(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	createNamespace(t, kube, "wt-wl-org", nil, nil)
	createNamespace(t, kube, "wt-wl", map[string]string{"implicit.dev/parent": "wt-wl-org"}, nil)
	createRoleBinding(t, kube, "wt-wl-org", "wt-wl-p", "view", "wl:viewers")
	createRoleBinding(t, kube, "wt-wl", "wt-wl-1", "edit", "wl:devs")
	createRoleBinding(t, kube, "wt-wl", "wt-wl-2", "admin", "wl:admins")
	waitForView(t, dyn, viewRoleBindings, "wt-wl", "wt-wl-", map[string]viewItem{
		"wt-wl-p": {Scope: "parent", Source: "wt-wl-org"},
		"wt-wl-1": {Scope: "local", Source: "wt-wl"},
		"wt-wl-2": {Scope: "local", Source: "wt-wl"},
	})
	list, err := dyn.Resource(viewRoleBindings).Namespace("wt-wl").List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, it := range list.Items {
		want = append(want, it.GetName())
	}
	sort.Strings(want)

	t.Log("watch with sendInitialEvents=true, resourceVersionMatch=NotOlderThan, allowWatchBookmarks=true")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	w, err := dyn.Resource(viewRoleBindings).Namespace("wt-wl").Watch(ctx, metav1.ListOptions{
		SendInitialEvents:    ptr.To(true),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	got := readUntil(t, w, "the initial-events-end bookmark", func(e watch.Event) bool {
		if e.Type != watch.Bookmark {
			return false
		}
		m, _ := meta.Accessor(e.Object)
		return m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
	})
	t.Logf("watch-list stream: %s", describeEvents(got))
	var added []string
	for _, e := range got[:len(got)-1] {
		if e.Type != watch.Added {
			t.Errorf("before the initial-events-end bookmark: %s, want ADDED only", describeEvent(e))
			continue
		}
		if m, _ := meta.Accessor(e.Object); m.GetNamespace() != "wt-wl" {
			t.Errorf("ADDED %s in namespace %q, want wt-wl", m.GetName(), m.GetNamespace())
		}
		added = append(added, nameOf(e))
	}
	sort.Strings(added)
	if strings.Join(added, " ") != strings.Join(want, " ") {
		t.Errorf("initial ADDED events: %v\nwant the list's items: %v", added, want)
	}
	bm, _ := meta.Accessor(got[len(got)-1].Object)
	bookmarkRV := mustParseRV(t, "bookmark", bm.GetResourceVersion())
	if listRV := mustParseRV(t, "list", list.GetResourceVersion()); bookmarkRV < listRV {
		t.Errorf("bookmark resourceVersion %d older than the list's %d", bookmarkRV, listRV)
	}

	t.Log("then the stream goes on with live events")
	createRoleBinding(t, kube, "wt-wl", "wt-wl-3", "view", "wl:late")
	live := readUntil(t, w, "ADDED wt-wl-3", func(e watch.Event) bool { return nameOf(e) == "wt-wl-3" })
	e := live[len(live)-1]
	m, _ := meta.Accessor(e.Object)
	if e.Type != watch.Added || mustParseRV(t, "event", m.GetResourceVersion()) <= bookmarkRV {
		t.Errorf("live event %s at resourceVersion %s, want ADDED after the bookmark's %d", describeEvent(e), m.GetResourceVersion(), bookmarkRV)
	}
}

// --- helpers ---

// kubectlEvent is one event printed by `kubectl get -w --output-watch-events -o json`.
type kubectlEvent struct {
	Type, Namespace, Name string
	Labels, Annotations   map[string]string
}

func (e kubectlEvent) String() string { return e.Type + " " + e.Namespace + "/" + e.Name }

// kubectlWatch is kubectl run in the background, its output decoded as it comes.
type kubectlWatch struct {
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	out     *io.PipeWriter
	decoded chan struct{}

	mu        sync.Mutex
	events    []kubectlEvent
	decodeErr error
	stderr    strings.Builder
}

func startKubectlWatch(t *testing.T, args ...string) *kubectlWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	k := &kubectlWatch{cancel: cancel, out: pw, decoded: make(chan struct{})}
	k.cmd = exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig=" + cp.KubeconfigPath()}, args...)...)
	k.cmd.Stdout = pw
	k.cmd.Stderr = lockedWriter{k}
	k.cmd.WaitDelay = 5 * time.Second
	if err := k.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting kubectl: %v", err)
	}
	go func() {
		defer close(k.decoded)
		dec := json.NewDecoder(pr)
		for {
			var ev struct {
				Type   string                    `json:"type"`
				Object unstructured.Unstructured `json:"object"`
			}
			if err := dec.Decode(&ev); err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
					k.mu.Lock()
					k.decodeErr = err
					k.mu.Unlock()
				}
				io.Copy(io.Discard, pr)
				return
			}
			k.mu.Lock()
			k.events = append(k.events, kubectlEvent{
				Type: ev.Type, Namespace: ev.Object.GetNamespace(), Name: ev.Object.GetName(),
				Labels: ev.Object.GetLabels(), Annotations: ev.Object.GetAnnotations(),
			})
			k.mu.Unlock()
		}
	}()
	t.Cleanup(func() { k.stop(t) })
	return k
}

type lockedWriter struct{ k *kubectlWatch }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.k.mu.Lock()
	defer w.k.mu.Unlock()
	return w.k.stderr.Write(p)
}

func (k *kubectlWatch) stderrText() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return strings.TrimSpace(k.stderr.String())
}

func (k *kubectlWatch) len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.events)
}

// find returns the index of the first event matching, or -1.
func (k *kubectlWatch) find(match func(kubectlEvent) bool) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, e := range k.events {
		if match(e) {
			return i
		}
	}
	return -1
}

// stop cancels kubectl, waits for it and its output, and returns every event
// it printed. It may be called more than once.
func (k *kubectlWatch) stop(t *testing.T) []kubectlEvent {
	t.Helper()
	k.cancel()
	_ = k.cmd.Wait() // killed by the cancellation: an error by design
	k.out.Close()
	<-k.decoded
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.decodeErr != nil {
		t.Errorf("decoding kubectl's output: %v (stderr: %s)", k.decodeErr, k.stderr.String())
		k.decodeErr = nil
	}
	return append([]kubectlEvent(nil), k.events...)
}

func countEvents(m map[string][]kubectlEvent) int {
	n := 0
	for _, evs := range m {
		n += len(evs)
	}
	return n
}

// waitNoTerminatingNamespaces gives namespaces of earlier tests time to go,
// so they do not send DELETED events in the middle of a check.
func waitNoTerminatingNamespaces(t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	start := time.Now()
	var left []string
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 2*converge, true, func(ctx context.Context) (bool, error) {
		list, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		left = nil
		for _, ns := range list.Items {
			if ns.DeletionTimestamp != nil {
				left = append(left, ns.Name)
			}
		}
		return len(left) == 0, nil
	})
	switch {
	case err != nil:
		t.Logf("namespaces still terminating after %s, checked leniently: %v", 2*converge, left)
	case time.Since(start) > time.Second:
		t.Logf("waited %s for namespaces of earlier tests to be deleted", time.Since(start).Round(time.Millisecond))
	}
}

// expectedHolders computes, from the namespaces and the RoleBindings named
// name, independently of the product's code, which views hold the global
// item name of resource: the global namespace itself (as a local item) and
// every tenant with no shadow of the name and no exclusion of it on itself
// or an ancestor. Terminating namespaces are returned apart.
func expectedHolders(t *testing.T, kube kubernetes.Interface, resource, name string) (want, terminating map[string]bool) {
	t.Helper()
	nsList, err := kube.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rbs, err := kube.RbacV1().RoleBindings("").List(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	namespaces := map[string]*corev1.Namespace{}
	for i := range nsList.Items {
		namespaces[nsList.Items[i].Name] = &nsList.Items[i]
	}
	shadowed := map[string]bool{}
	for _, rb := range rbs.Items {
		if rb.Namespace != globalNS {
			shadowed[rb.Namespace] = true
		}
	}
	tenant := func(ns *corev1.Namespace) bool {
		switch ns.Name {
		case globalNS, "kube-system", "kube-public", "kube-node-lease":
			return false
		}
		return ns.Labels["implicit.dev/inherit"] != "false"
	}
	excludes := func(ns *corev1.Namespace) bool {
		for _, entry := range strings.Split(ns.Annotations["implicit.dev/exclude"], ",") {
			r, n, ok := strings.Cut(entry, "/")
			if ok && strings.EqualFold(strings.TrimSpace(r), resource) && (strings.TrimSpace(n) == name || strings.TrimSpace(n) == "*") {
				return true
			}
		}
		return false
	}
	// lineage is ns and its ancestors: the walk stops at a missing or
	// non-tenant parent; a namespace in a cycle has no ancestors, one below
	// a cycle keeps those up to the cycle's first namespace.
	lineage := func(ns *corev1.Namespace) []*corev1.Namespace {
		path := []*corev1.Namespace{ns}
		seen := map[string]int{ns.Name: 0}
		for cur := ns; ; {
			p := cur.Labels["implicit.dev/parent"]
			if p == "" {
				return path
			}
			if i, ok := seen[p]; ok {
				if i == 0 {
					return path[:1]
				}
				return path
			}
			next, ok := namespaces[p]
			if !ok || !tenant(next) {
				return path
			}
			seen[p] = len(path)
			path = append(path, next)
			cur = next
		}
	}
	want, terminating = map[string]bool{}, map[string]bool{}
	for _, ns := range namespaces {
		if ns.DeletionTimestamp != nil {
			terminating[ns.Name] = true
			continue
		}
		if ns.Name == globalNS {
			want[ns.Name] = true
			continue
		}
		if !tenant(ns) {
			continue
		}
		holds := true
		for _, a := range lineage(ns) {
			if shadowed[a.Name] || excludes(a) {
				holds = false
			}
		}
		if holds {
			want[ns.Name] = true
		}
	}
	return want, terminating
}

// globalHolders asks the server which views hold the global item name: those
// where it is global, and the global namespace, where it is local.
func globalHolders(ctx context.Context, dyn dynamic.Interface, name string) (map[string]bool, error) {
	list, err := dyn.Resource(viewRoleBindings).List(ctx, metav1.ListOptions{
		LabelSelector: "implicit.dev/scope=global",
		FieldSelector: "metadata.name=" + name,
	})
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, it := range list.Items {
		out[it.GetNamespace()] = true
	}
	if _, err := dyn.Resource(viewRoleBindings).Namespace(globalNS).Get(ctx, name, metav1.GetOptions{}); err != nil {
		return nil, err
	}
	out[globalNS] = true
	return out, nil
}

func patchRoleBinding(ctx context.Context, kube kubernetes.Interface, ns, name string, patch map[string]any) error {
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = kube.RbacV1().RoleBindings(ns).Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{})
	return err
}

// readUntil reads w until done accepts an event, and returns the events
// read. It fails the test if the watch ends, reports an error, or done
// accepts nothing within converge.
func readUntil(t *testing.T, w watch.Interface, what string, done func(watch.Event) bool) []watch.Event {
	t.Helper()
	timer := time.NewTimer(converge)
	defer timer.Stop()
	var got []watch.Event
	for {
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("waiting for %s: the watch ended after %s", what, describeEvents(got))
			}
			if e.Type == watch.Error {
				t.Fatalf("waiting for %s: error event %v after %s", what, apierrors.FromObject(e.Object), describeEvents(got))
			}
			got = append(got, e)
			if done(e) {
				return got
			}
		case <-timer.C:
			t.Fatalf("waiting for %s: not seen within %s; got %s", what, converge, describeEvents(got))
		}
	}
}

func nameOf(e watch.Event) string {
	m, err := meta.Accessor(e.Object)
	if err != nil {
		return ""
	}
	return m.GetName()
}

func describeEvent(e watch.Event) string {
	m, err := meta.Accessor(e.Object)
	if err != nil {
		return fmt.Sprintf("%s %T", e.Type, e.Object)
	}
	if e.Type == watch.Bookmark {
		return fmt.Sprintf("BOOKMARK rv=%s %v", m.GetResourceVersion(), m.GetAnnotations())
	}
	return fmt.Sprintf("%s %s/%s rv=%s", e.Type, m.GetNamespace(), m.GetName(), m.GetResourceVersion())
}

func describeEvents(evs []watch.Event) string {
	if len(evs) == 0 {
		return "no events"
	}
	s := make([]string, len(evs))
	for i, e := range evs {
		s[i] = describeEvent(e)
	}
	return strings.Join(s, "; ")
}

// mustParseRV parses a view's resourceVersion and returns the sequence
// number it carries for the replica that issued it, which orders that
// replica's versions (pkg/resourceversion).
func mustParseRV(t *testing.T, what, rv string) uint64 {
	t.Helper()
	v, err := resourceversion.Parse(rv)
	if err != nil || v.Seq == 0 {
		t.Fatalf("%s resourceVersion %q is not a view's version: %v", what, rv, err)
	}
	return v.Seq
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// startInformer runs a dynamic shared informer on the RoleBinding views of
// namespace ("" for all) until the test ends, and returns its store and a
// function listing the watch errors it met.
func startInformer(t *testing.T, dyn dynamic.Interface, namespace string) (cache.Store, func() []string) {
	t.Helper()
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, namespace, nil)
	informer := factory.ForResource(viewRoleBindings).Informer()
	var mu sync.Mutex
	var errs []string
	if err := informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err.Error())
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	syncCtx, syncCancel := context.WithTimeout(t.Context(), converge)
	defer syncCancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		t.Fatalf("the informer on rolebindings.implicit.dev in %q did not sync within %s", namespace, converge)
	}
	t.Logf("informer on rolebindings.implicit.dev (namespace %q) synced", namespace)
	return informer.GetStore(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), errs...)
	}
}

// fingerprint is what the informer and a list must agree on for one item.
func fingerprint(u *unstructured.Unstructured) string {
	return u.GetLabels()["implicit.dev/scope"] + "|" + u.GetLabels()["implicit.dev/source-namespace"] + "|" + u.GetAnnotations()["implicit.dev/source-resource-version"]
}

// waitConverged waits until the informer's store, restricted to keep,
// equals a list of namespace ("" for all) from the server, and returns it
// as namespace/name -> scope|source-namespace|source-resource-version.
func waitConverged(t *testing.T, dyn dynamic.Interface, store cache.Store, namespace string, keep func(ns, name string) bool, when string) map[string]string {
	t.Helper()
	var server map[string]string
	eventually(t, "the informer's store equals the server's list "+when, func(ctx context.Context) error {
		list, err := dyn.Resource(viewRoleBindings).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		server = map[string]string{}
		for i := range list.Items {
			it := &list.Items[i]
			if keep(it.GetNamespace(), it.GetName()) {
				server[it.GetNamespace()+"/"+it.GetName()] = fingerprint(it)
			}
		}
		informer := map[string]string{}
		for _, obj := range store.List() {
			it, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return fmt.Errorf("informer holds a %T", obj)
			}
			if keep(it.GetNamespace(), it.GetName()) {
				informer[it.GetNamespace()+"/"+it.GetName()] = fingerprint(it)
			}
		}
		return diffStates(informer, server)
	})
	t.Logf("converged %s: %d items", when, len(server))
	return server
}

func diffStates(informer, server map[string]string) error {
	var diffs []string
	for k, v := range server {
		if got, ok := informer[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s missing from the informer (server: %s)", k, v))
		} else if got != v {
			diffs = append(diffs, fmt.Sprintf("%s: informer %s, server %s", k, got, v))
		}
	}
	for k, v := range informer {
		if _, ok := server[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s only in the informer (%s)", k, v))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	sort.Strings(diffs)
	return errors.New(strings.Join(diffs, "\n "))
}

// ensureImplicitRunning leaves implicit-apiserver running and its APIService
// Available for the tests that follow, whatever happened in this one.
func ensureImplicitRunning(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if implicit.Process() == nil {
		t.Log("implicit-apiserver is stopped: starting it again for the tests that follow")
		if err := implicit.Restart(context.Background()); err != nil {
			t.Errorf("restarting implicit-apiserver: %v", err)
			return
		}
	}
	if err := cp.WaitAPIServiceAvailable(ctx); err != nil {
		t.Errorf("after the test: %v", err)
	}
}
