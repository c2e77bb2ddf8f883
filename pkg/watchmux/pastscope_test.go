package watchmux_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// lineageCluster is a fake cluster of 20 teams under the global namespace,
// team-03 a child of org, with global, org and local RoleBindings.
func lineageCluster() (*fakeCluster, func(ns, name, user string) fakeChange) {
	c := &fakeCluster{}
	c.write("namespaces", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: global, UID: "uid-global"}}, false)
	c.write("namespaces", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "org", UID: "uid-org"}}, false)
	for i := range 20 {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("team-%02d", i), UID: types.UID(fmt.Sprintf("uid-team-%02d", i))}}
		if i == 3 {
			ns.Labels = map[string]string{v1alpha1.LabelParent: "org"}
		}
		c.write("namespaces", ns, false)
	}
	rb := bindingWriter(c)
	for i := range 5 {
		rb(global, fmt.Sprintf("g-%d", i), "u")
	}
	rb("org", "o-0", "u")
	for i := range 20 {
		rb(fmt.Sprintf("team-%02d", i), "local", "u")
	}
	return c, rb
}

// bindingWriter returns a function that writes the RoleBinding
// namespace/name, binding user to the view ClusterRole, to c.
func bindingWriter(c *fakeCluster) func(ns, name, user string) fakeChange {
	return func(ns, name, user string) fakeChange {
		return c.write(rolebindings, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name)},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: user}},
		}, false)
	}
}

// teamsCluster is a fake cluster of the global namespace and n teams,
// team-000 on, each with a local RoleBinding; it returns the teams' names.
func teamsCluster(n int) (*fakeCluster, []string) {
	c := &fakeCluster{}
	c.write("namespaces", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: global, UID: "uid-global"}}, false)
	rb := bindingWriter(c)
	var teams []string
	for i := range n {
		name := fmt.Sprintf("team-%03d", i)
		teams = append(teams, name)
		c.write("namespaces", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}, false)
		rb(name, "local", "u")
	}
	return c, teams
}

// TestOneNamespaceResumeListsItsLineage: a replica without history for a
// version serves a one-namespace watch from it by listing the namespaces
// once, then that resource's sources only in the namespaces the view
// merges (the namespace, its ancestors, the global namespace), each with
// its own exact list; another namespace's resume from the same version
// lists the namespaces and the global namespace no more.
func TestOneNamespaceResumeListsItsLineage(t *testing.T) {
	t.Parallel()
	c, rb := lineageCluster()
	rng := rand.New(rand.NewPCG(7, 31))
	a := c.startReplica(rng)
	version, err := a.Read(func(watchmux.Reader) {})
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]viewState{"team-03": currentView(t, a, "team-03"), "team-07": currentView(t, a, "team-07")}
	for _, ch := range []fakeChange{rb(global, "g-1", "edited"), rb("org", "o-0", "edited"), rb("team-03", "local", "edited"), rb("team-07", "new", "u")} {
		feedChange(a, ch)
	}
	restarted := c.startReplica(rng)

	resume := func(namespace string) []listCall {
		t.Helper()
		c.mu.Lock()
		c.lists = nil
		c.mu.Unlock()
		w, err := restarted.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings, Namespace: namespace, ResourceVersion: version, AllowBookmarks: true})
		if err != nil {
			t.Fatalf("resuming %s: %v", namespace, err)
		}
		s := held[namespace].clone()
		for _, ev := range readUntilBookmark(t, w) {
			s.apply(t, ev, "resume of "+namespace)
		}
		w.Stop()
		if d := s.diff(currentView(t, a, namespace)); len(d) > 0 {
			t.Errorf("resume of %s: the client does not end with the view: %v", namespace, d)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.lists
	}

	calls := resume("team-03")
	lineage := map[string]bool{"team-03": true, "org": true, global: true}
	namespaceLists, listed := 0, map[string]bool{}
	for _, l := range calls {
		switch {
		case l.key == "namespaces":
			namespaceLists++
		case l.namespace == "":
			t.Errorf("team-03's resume listed every %s (%d objects)", l.key, l.objects)
		case !lineage[l.namespace]:
			t.Errorf("team-03's resume listed %s in %s, outside its lineage", l.key, l.namespace)
		default:
			listed[l.namespace] = true
		}
	}
	if namespaceLists != 1 {
		t.Errorf("team-03's resume listed the namespaces %d times, want once", namespaceLists)
	}
	for ns := range lineage {
		if !listed[ns] {
			t.Errorf("team-03's resume did not list the sources in %s: %+v", ns, calls)
		}
	}

	calls = resume("team-07")
	if len(calls) != 1 || calls[0].key != rolebindings || calls[0].namespace != "team-07" {
		t.Errorf("team-07's resume from the same version listed %+v, want only its own rolebindings (the namespaces and the global namespace are cached)", calls)
	}
}

// TestManyNamespaceResumesListOnce: the clients of 100 namespaces resume
// from one version (a bookmark all of them hold): the replica lists the
// namespaces and the global namespace once, then the first namespaces one
// by one, then the source once in full for the rest; every client ends
// with its view.
func TestManyNamespaceResumesListOnce(t *testing.T) {
	t.Parallel()
	c, teams := teamsCluster(100)
	rb := bindingWriter(c)
	rb(global, "g", "u")
	rng := rand.New(rand.NewPCG(9, 31))
	a := c.startReplica(rng)
	version, err := a.Read(func(watchmux.Reader) {})
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]viewState{}
	for _, ns := range teams {
		held[ns] = currentView(t, a, ns)
	}
	feedChange(a, rb(global, "g", "edited"))
	feedChange(a, rb("team-050", "local", "edited"))
	restarted := c.startReplica(rng)
	c.mu.Lock()
	c.lists = nil
	c.mu.Unlock()
	for _, ns := range teams {
		w, err := restarted.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings, Namespace: ns, ResourceVersion: version, AllowBookmarks: true})
		if err != nil {
			t.Fatalf("resuming %s: %v", ns, err)
		}
		s := held[ns].clone()
		for _, ev := range readUntilBookmark(t, w) {
			s.apply(t, ev, "resume of "+ns)
		}
		w.Stop()
		if d := s.diff(currentView(t, a, ns)); len(d) > 0 {
			t.Errorf("resume of %s: the client does not end with the view: %v", ns, d)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	namespaceLists, full, perNamespace := 0, 0, 0
	for _, l := range c.lists {
		switch {
		case l.key == "namespaces":
			namespaceLists++
		case l.namespace == "":
			full++
		default:
			perNamespace++
		}
	}
	if namespaceLists != 1 || full != 1 || perNamespace >= len(teams) {
		t.Errorf("100 namespaces' resumes from one version listed the namespaces %d times, the source in full %d times and in one namespace %d times; want once, once, and fewer than 100", namespaceLists, full, perNamespace)
	}
}

// TestResumeRetriesAPassingListFailure: a resume whose exact lists fail
// for a passing reason (kube-apiserver's timeout or 429, as under the load
// of every client of a restarted replica resuming at once) is answered 429
// with Retry-After, which client-go's reflector retries from the same
// version, not 410, which makes it relist though the version is within the
// compaction window; once the lists succeed, the same version is served.
func TestResumeRetriesAPassingListFailure(t *testing.T) {
	t.Parallel()
	c, rb := lineageCluster()
	rng := rand.New(rand.NewPCG(11, 31))
	a := c.startReplica(rng)
	version, err := a.Read(func(watchmux.Reader) {})
	if err != nil {
		t.Fatal(err)
	}
	feedChange(a, rb(global, "g-1", "edited"))
	restarted := c.startReplica(rng)
	var mu sync.Mutex
	failing := true
	for _, key := range []string{"namespaces", rolebindings} {
		list := c.lister(key)
		f := func(ctx context.Context, rv, namespace string) ([]runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			if failing {
				return nil, apierrors.NewTimeoutError("the server was unable to return a response in the time allotted", 1)
			}
			return list(ctx, rv, namespace)
		}
		if key == "namespaces" {
			restarted.SetNamespaceList(f)
		} else {
			restarted.SetSourceList(key, "", f)
		}
	}
	for _, scope := range []string{"", "team-03"} {
		_, err := restarted.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings, Namespace: scope, ResourceVersion: version})
		if !apierrors.IsTooManyRequests(err) {
			t.Errorf("a resume of scope %q whose lists time out: %v, want 429 (retry the watch), not a relist", scope, err)
		}
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	for _, scope := range []string{"", "team-03"} {
		w, err := restarted.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings, Namespace: scope, ResourceVersion: version, AllowBookmarks: true})
		if err != nil {
			t.Fatalf("the resume of scope %q once the lists succeed: %v", scope, err)
		}
		readUntilBookmark(t, w)
		w.Stop()
	}
}

// TestFullListsDroppedAreNotListedAgain: the clients of many namespaces
// resume from five versions (five revisions of the source: more full lists
// than are kept) in turn. Each revision is listed in full at most once;
// once its full list is dropped, its next namespaces are listed one by one,
// not each with a full list of the source (an LRU of four read in turn by
// five keeps none).
func TestFullListsDroppedAreNotListedAgain(t *testing.T) {
	t.Parallel()
	c, teams := teamsCluster(70)
	rb := bindingWriter(c)
	rng := rand.New(rand.NewPCG(13, 31))
	a := c.startReplica(rng)
	var versions []string
	for i := range 5 {
		feedChange(a, rb(global, "g", fmt.Sprintf("user-%d", i)))
		v, err := a.Read(func(watchmux.Reader) {})
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
	}
	restarted := c.startReplica(rng)
	resume := func(ns, version string) {
		t.Helper()
		w, err := restarted.Watch(t.Context(), watchmux.WatchOptions{Resource: rolebindings, Namespace: ns, ResourceVersion: version, AllowBookmarks: true})
		if err != nil {
			t.Fatalf("resuming %s from %s: %v", ns, version, err)
		}
		readUntilBookmark(t, w)
		w.Stop()
	}
	// 64 namespaces from each version: each revision's next namespaces
	// read its full list.
	for _, v := range versions {
		for _, ns := range teams[:64] {
			resume(ns, v)
		}
	}
	// The next namespaces, from the five versions in turn.
	for _, ns := range teams[64:] {
		for _, v := range versions {
			resume(ns, v)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	full := map[uint64]int{}
	for _, l := range c.lists {
		if l.key == rolebindings && l.namespace == "" {
			full[l.rev]++
		}
	}
	for rev, n := range full {
		if n > 1 {
			t.Errorf("the source at revision %d was listed in full %d times, want at most once", rev, n)
		}
	}
}
