package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// TestExactListAtPastVersion does one sequence on native RoleBindings and on
// their view: list, change (edit, delete, create, an inherited edit), then
// list with resourceVersionMatch=Exact at the first list's version. Both
// answer the state as it was, whole, with a label selector and page by
// page; the view's list carries the version asked for. Then, once etcd has
// compacted past a version: where kube-apiserver answers 410 Gone, the view
// answers 410 too, or the same state from the past states it keeps (a
// little past a compaction, docs/design.md); where kube-apiserver still
// serves it, the view answers alike.
func TestExactListAtPastVersion(t *testing.T) {
	kube, dyn := admin(t)
	ensureNamespace(t, kube, globalNS)
	createNamespace(t, kube, "xp-org", nil, nil)
	createNamespace(t, kube, "xp-team", map[string]string{"implicit.dev/parent": "xp-org"}, nil)
	createRoleBinding(t, kube, "xp-org", "xp-inherited", "view", "org:viewers", withLabel("tier", "x"))
	createRoleBinding(t, kube, "xp-team", "xp-edited", "view", "team:a", withLabel("tier", "x"))
	createRoleBinding(t, kube, "xp-team", "xp-deleted", "view", "team:b")
	createRoleBinding(t, kube, "xp-team", "xp-kept", "view", "team:c")
	waitForView(t, dyn, viewRoleBindings, "xp-team", "xp-", map[string]viewItem{
		"xp-inherited": {Scope: "parent", Source: "xp-org"},
		"xp-edited":    {Scope: "local", Source: "xp-team"},
		"xp-deleted":   {Scope: "local", Source: "xp-team"},
		"xp-kept":      {Scope: "local", Source: "xp-team"},
	})
	ctx := t.Context()

	native, nativeRV := nativeList(t, kube, metav1.ListOptions{})
	view, viewRV := viewList(t, dyn, "xp-team", metav1.ListOptions{})
	all, allRV := viewList(t, dyn, "", metav1.ListOptions{})
	all = only(all, "xp-team/", "xp-org/")
	t.Logf("before the changes: native at %s, the view at %s, every namespace's at %s", nativeRV, viewRV, allRV)

	t.Log("changes: xp-edited edited, xp-deleted deleted, xp-created created, the inherited xp-inherited edited")
	subjects := func(namespace, name, group string) {
		t.Helper()
		rb, err := kube.RbacV1().RoleBindings(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rb.Subjects[0].Name = group
		if _, err := kube.RbacV1().RoleBindings(namespace).Update(ctx, rb, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	subjects("xp-team", "xp-edited", "team:edited")
	subjects("xp-org", "xp-inherited", "org:edited")
	if err := kube.RbacV1().RoleBindings("xp-team").Delete(ctx, "xp-deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	createRoleBinding(t, kube, "xp-team", "xp-created", "view", "team:d")
	eventually(t, "the view shows the changes", func(ctx context.Context) error {
		items, _, err := listViewItems(ctx, dyn, "xp-team", metav1.ListOptions{})
		if err != nil {
			return err
		}
		got := subjectsOf(items)
		want := map[string]string{"xp-team/xp-inherited": "org:edited", "xp-team/xp-edited": "team:edited", "xp-team/xp-kept": "team:c", "xp-team/xp-created": "team:d"}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("view %v, want %v", got, want)
		}
		return nil
	})

	exact := func(rv string) metav1.ListOptions {
		return metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact}
	}
	t.Log("an exact list at the first version: the state before the changes")
	if got, rv := nativeList(t, kube, exact(nativeRV)); !reflect.DeepEqual(got, native) || rv != nativeRV {
		t.Errorf("native: an exact list at %s = %v at %s, want %v", nativeRV, keysOf(got), rv, keysOf(native))
	}
	if got, rv := viewList(t, dyn, "xp-team", exact(viewRV)); !reflect.DeepEqual(got, view) || rv != viewRV {
		t.Errorf("view: an exact list at %s = %v at %s, want %v\n%s", viewRV, keysOf(got), rv, keysOf(view), firstDiff(got, view))
	}
	if got, rv := viewList(t, dyn, "", exact(allRV)); !reflect.DeepEqual(only(got, "xp-team/", "xp-org/"), all) || rv != allRV {
		t.Errorf("view, every namespace: an exact list at %s = %v at %s, want %v", allRV, keysOf(only(got, "xp-team/", "xp-org/")), rv, keysOf(all))
	}

	t.Log("with a label selector")
	sel := exact(nativeRV)
	sel.LabelSelector = "tier=x"
	if got, _ := nativeList(t, kube, sel); !reflect.DeepEqual(got, only(native, "xp-team/xp-edited")) {
		t.Errorf("native: an exact list at %s with tier=x = %v, want xp-edited as it was", nativeRV, keysOf(got))
	}
	sel.ResourceVersion = viewRV
	if got, _ := viewList(t, dyn, "xp-team", sel); !reflect.DeepEqual(got, only(view, "xp-team/xp-edited", "xp-team/xp-inherited")) {
		t.Errorf("view: an exact list at %s with tier=x = %v, want xp-edited and xp-inherited as they were", viewRV, keysOf(got))
	}

	t.Log("page by page")
	if got, rvs := nativePages(t, kube, nativeRV); !reflect.DeepEqual(got, native) || !allEqual(rvs, nativeRV) {
		t.Errorf("native: the pages of an exact list at %s = %v at %v, want %v", nativeRV, keysOf(got), rvs, keysOf(native))
	}
	if got, rvs := viewPages(t, dyn, "xp-team", viewRV); !reflect.DeepEqual(got, view) || !allEqual(rvs, viewRV) {
		t.Errorf("view: the pages of an exact list at %s = %v at %v, want %v", viewRV, keysOf(got), rvs, keysOf(view))
	}

	t.Log("a revision etcd has compacted: the view answers 410 as kube-apiserver does, or the same state from its recent past states")
	// Revision 2, older than kube-apiserver's watch cache (which serves
	// exact lists of recent revisions from its snapshots, compacted or
	// not): kube-apiserver reads it from etcd. The view's version of that
	// state is any of its versions with every revision at most 2.
	const oldRV = "2"
	v, err := resourceversion.Parse(viewRV)
	if err != nil {
		t.Fatal(err)
	}
	old := resourceversion.Version{Fingerprint: v.Fingerprint}
	for _, c := range v.Vector {
		old.Vector = append(old.Vector, min(c, 2))
	}
	oldView := old.String()
	if got, rv := nativeList(t, kube, exact(oldRV)); len(got) != 0 || rv != oldRV {
		t.Errorf("native: an exact list at %s before the compaction = %v at %s, want no items", oldRV, keysOf(got), rv)
	}
	if got, rv := viewList(t, dyn, "xp-team", exact(oldView)); len(got) != 0 || rv != oldView {
		t.Errorf("view: an exact list at %s before the compaction = %v at %s, want no items (no namespace yet)", oldView, keysOf(got), rv)
	}
	_, now := nativeList(t, kube, metav1.ListOptions{})
	compactEtcd(t, now)
	for _, namespace := range []string{"xp-team", ""} {
		nativeL, nativeErr := kube.RbacV1().RoleBindings(namespace).List(ctx, exact(oldRV))
		viewL, viewErr := dyn.Resource(viewRoleBindings).Namespace(namespace).List(ctx, exact(oldView))
		switch {
		case apierrors.IsResourceExpired(nativeErr):
			t.Logf("namespace %q: kube-apiserver answers revision %s 410 Gone after the compaction", namespace, oldRV)
			switch {
			case apierrors.IsResourceExpired(viewErr):
			case viewErr == nil && len(viewL.Items) == 0 && viewL.GetResourceVersion() == oldView:
				// The state the view listed before the compaction, kept
				// among its recent past states (as kube-apiserver's watch
				// cache keeps recent snapshots and sometimes serves them
				// after a compaction): still that version's state.
				t.Logf("view of namespace %q: served from its recent past states, the same state as before the compaction", namespace)
			default:
				t.Errorf("view of namespace %q: an exact list at %s after the compaction: %v, %v; want 410 Gone, or the state it answered before", namespace, oldView, viewL, viewErr)
			}
		case nativeErr != nil:
			t.Fatalf("native: an exact list at %s after the compaction: %v", oldRV, nativeErr)
		default:
			// Seen with etcd 3.7 and kube-apiserver 1.37: an empty list at
			// revision 2 after the compaction, although etcd's own range
			// request at 2 answers "compacted". The view lists its sources
			// through kube-apiserver, and answers alike.
			t.Logf("namespace %q: kube-apiserver still answers revision %s after the compaction (%d items)", namespace, oldRV, len(nativeL.Items))
			if viewErr != nil || len(viewL.Items) != len(nativeL.Items) || viewL.GetResourceVersion() != oldView {
				t.Errorf("view of namespace %q: an exact list at %s after the compaction: %v, %v; want what kube-apiserver answers, %d items", namespace, oldView, viewL, viewErr, len(nativeL.Items))
			}
		}
	}
}

// nativeList lists xp-team's RoleBindings with opts: the items by
// namespace/name, as JSON, and the list's resourceVersion.
func nativeList(t *testing.T, kube kubernetes.Interface, opts metav1.ListOptions) (map[string]string, string) {
	t.Helper()
	l, err := kube.RbacV1().RoleBindings("xp-team").List(t.Context(), opts)
	if err != nil {
		t.Fatalf("native list %+v: %v", opts, err)
	}
	return nativeItems(t, l.Items), l.ResourceVersion
}

func nativeItems(t *testing.T, items []rbacv1.RoleBinding) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, it := range items {
		b, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		out[it.Namespace+"/"+it.Name] = string(b)
	}
	return out
}

// nativePages lists xp-team's RoleBindings at rv exactly, one item a page.
func nativePages(t *testing.T, kube kubernetes.Interface, rv string) (map[string]string, []string) {
	t.Helper()
	out, rvs := map[string]string{}, []string(nil)
	opts := metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Limit: 1}
	for {
		l, err := kube.RbacV1().RoleBindings("xp-team").List(t.Context(), opts)
		if err != nil {
			t.Fatalf("native page %+v: %v", opts, err)
		}
		for k, v := range nativeItems(t, l.Items) {
			out[k] = v
		}
		rvs = append(rvs, l.ResourceVersion)
		if l.Continue == "" {
			return out, rvs
		}
		opts = metav1.ListOptions{Continue: l.Continue, Limit: 1}
	}
}

// listViewItems lists the view of namespace ("" for all) with opts.
func listViewItems(ctx context.Context, dyn dynamic.Interface, namespace string, opts metav1.ListOptions) (map[string]string, *unstructured.UnstructuredList, error) {
	l, err := dyn.Resource(viewRoleBindings).Namespace(namespace).List(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]string{}
	for i := range l.Items {
		b, err := json.Marshal(l.Items[i].Object)
		if err != nil {
			return nil, nil, err
		}
		out[l.Items[i].GetNamespace()+"/"+l.Items[i].GetName()] = string(b)
	}
	return out, l, nil
}

// viewList is listViewItems, failing the test on an error, with the
// list's resourceVersion.
func viewList(t *testing.T, dyn dynamic.Interface, namespace string, opts metav1.ListOptions) (map[string]string, string) {
	t.Helper()
	items, l, err := listViewItems(t.Context(), dyn, namespace, opts)
	if err != nil {
		t.Fatalf("view list of %q %+v: %v", namespace, opts, err)
	}
	return items, l.GetResourceVersion()
}

// viewPages lists the view of namespace at rv exactly, one item a page.
func viewPages(t *testing.T, dyn dynamic.Interface, namespace, rv string) (map[string]string, []string) {
	t.Helper()
	out, rvs := map[string]string{}, []string(nil)
	opts := metav1.ListOptions{ResourceVersion: rv, ResourceVersionMatch: metav1.ResourceVersionMatchExact, Limit: 1}
	for {
		items, l, err := listViewItems(t.Context(), dyn, namespace, opts)
		if err != nil {
			t.Fatalf("view page %+v: %v", opts, err)
		}
		for k, v := range items {
			out[k] = v
		}
		rvs = append(rvs, l.GetResourceVersion())
		if l.GetContinue() == "" {
			return out, rvs
		}
		opts = metav1.ListOptions{Continue: l.GetContinue(), Limit: 1}
	}
}

// subjectsOf maps view items, as JSON, to their first subject's name.
func subjectsOf(items map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range items {
		if !strings.Contains(k, "/xp-") {
			continue
		}
		var rb rbacv1.RoleBinding
		if json.Unmarshal([]byte(v), &rb) == nil && len(rb.Subjects) > 0 {
			out[k] = rb.Subjects[0].Name
		}
	}
	return out
}

// only keeps the items whose key starts with one of prefixes.
func only(items map[string]string, prefixes ...string) map[string]string {
	out := map[string]string{}
	for k, v := range items {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				out[k] = v
			}
		}
	}
	return out
}

func keysOf(items map[string]string) []string {
	out := make([]string, 0, len(items))
	for k := range items {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// firstDiff describes the first item that differs between got and want.
func firstDiff(got, want map[string]string) string {
	for _, k := range keysOf(want) {
		if got[k] != want[k] {
			return fmt.Sprintf("%s:\n got  %s\n want %s", k, got[k], want[k])
		}
	}
	return ""
}

func allEqual(rvs []string, rv string) bool {
	for _, r := range rvs {
		if r != rv {
			return false
		}
	}
	return len(rvs) > 0
}

// compactEtcd compacts the control plane's etcd up to revision rev, as
// kube-apiserver does every --etcd-compaction-interval: older revisions are
// gone.
func compactEtcd(t *testing.T, rev string) {
	t.Helper()
	body := fmt.Sprintf(`{"revision":%q,"physical":true}`, rev)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, cp.EtcdURL()+"/v3/kv/compaction", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("compacting etcd at %s: %v", rev, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("compacting etcd at %s: %s %s", rev, resp.Status, b)
	}
	t.Logf("etcd compacted at revision %s: %s", rev, b)
}
