package watchmux

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
	"github.com/implicit-dev/implicit-apiserver/pkg/sourcefeed"
)

// hubRegistrations is the hub's history of one MemberCluster: its state
// (nil: none) at each revision written, as an exact list reads it.
type hubRegistrations struct {
	mu  sync.Mutex
	at  map[uint64]*unstructured.Unstructured
	top uint64
}

func (h *hubRegistrations) write(rev uint64, labels map[string]string) *unstructured.Unstructured {
	h.mu.Lock()
	defer h.mu.Unlock()
	var u *unstructured.Unstructured
	if labels != nil {
		u = &unstructured.Unstructured{}
		u.SetAPIVersion("fleet.implicit.dev/v1alpha1")
		u.SetKind("MemberCluster")
		u.SetName("member-1")
		u.SetResourceVersion(strconv.FormatUint(rev, 10))
		u.SetLabels(labels)
	}
	if h.at == nil {
		h.at = map[uint64]*unstructured.Unstructured{}
	}
	h.at[rev], h.top = u, max(h.top, rev)
	return u
}

// list is the registration's exact list at rev.
func (h *hubRegistrations) list(_ context.Context, version, _ string) ([]runtime.Object, error) {
	rev, err := strconv.ParseUint(version, 10, 64)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var last *unstructured.Unstructured
	for r := uint64(0); r <= rev && r <= h.top; r++ {
		if u, ok := h.at[r]; ok {
			last = u
		}
	}
	if last == nil {
		return nil, nil
	}
	return []runtime.Object{last.DeepCopy()}, nil
}

// stagedObjects builds view items as copies of the source under the view
// item's name, annotated with the candidate they come from.
type stagedObjects struct{ itemObjects }

func (stagedObjects) Item(_, namespace string, r merge.Result, rv string) (runtime.Object, error) {
	rb := r.Item.Object.(*rbacv1.RoleBinding).DeepCopy()
	rb.Namespace, rb.Name, rb.ResourceVersion = namespace, r.Item.Name, rv
	rb.Annotations = map[string]string{v1alpha1.AnnotationCandidate: r.Candidates()}
	return rb, nil
}

// nothingLW is a ListerWatcher the test never runs.
type nothingLW struct{}

func (nothingLW) List(metav1.ListOptions) (runtime.Object, error) {
	return &unstructured.UnstructuredList{}, nil
}
func (nothingLW) Watch(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil }

// canaryReplica is a replica whose global g has a candidate g.next for the
// canary stage in the member clusters labelled stage canary, and team-a in
// that stage; its registration is fed through a Tracker's sink, by hand.
func canaryReplica(t *testing.T, hub *hubRegistrations) (*Mux, sourcefeed.Sink) {
	t.Helper()
	m := New(merge.Policy{GlobalNamespace: global}, []string{"rolebindings"}, stagedObjects{}, Options{})
	tr := sourcefeed.New("memberclusters", nothingLW{})
	informer := cache.NewSharedIndexInformer(tr.ListerWatcher(), &unstructured.Unstructured{}, 0, cache.Indexers{})
	if err := m.AddMembership("member-1", "hub", informer, tr, hub.list); err != nil {
		t.Fatal(err)
	}
	m.ApplyNamespaceAt(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: global, ResourceVersion: "1"}}, false, 1)
	m.ApplyNamespaceAt(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", ResourceVersion: "2",
		Labels: map[string]string{v1alpha1.LabelStage: "canary"}}}, false, 2)
	m.OnSource("rolebindings", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: global, Name: "g", ResourceVersion: "3"}}, false)
	m.OnSource("rolebindings", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: global, Name: "g.next", ResourceVersion: "4",
		Annotations: map[string]string{
			v1alpha1.AnnotationCandidateFor:   "g",
			v1alpha1.AnnotationCanarySelector: v1alpha1.LabelStage + "=canary",
			v1alpha1.AnnotationCanaryClusters: "stage=canary",
		}}}, false)
	sink := &membershipSink{m: m}
	sink.Apply([]sourcefeed.Change{{Object: hub.write(10, map[string]string{"stage": "canary"})}}, 10)
	m.MarkSynced()
	if got := teamACandidate(t, m); got != "g.next" {
		t.Fatalf("registered in the canary clusters: team-a/g from %q, want g.next", got)
	}
	return m, sink
}

// teamACandidate is the candidate team-a's g comes from ("": the stable g).
func teamACandidate(t *testing.T, m *Mux) string {
	t.Helper()
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, r := range m.st.results("rolebindings", "team-a", "g") {
		return r.Candidates()
	}
	t.Fatal("team-a's view has no g")
	return ""
}

// withMembership is version with the registration's component at rev: the
// version of a replica whose registration informer is ahead.
func withMembership(t *testing.T, m *Mux, version string, rev uint64) string {
	t.Helper()
	v, err := rv.Parse(version)
	if err != nil {
		t.Fatal(err)
	}
	m.mu.RLock()
	k := m.pos.index(m.membershipKey)
	m.mu.RUnlock()
	v.Vector, v.Seq, v.Mid = append([]uint64(nil), v.Vector...), 0, nil
	v.Vector[k] = rev
	return v.String()
}

// TestMembershipCatchUpComparesTheRegistration: replica B holds the
// registration in the canary clusters (g.next in team-a's view); it is
// deleted at hub revision 11, which replica A has and B's informer has not
// delivered. A client of A at 11 (team-a sees the stable g) resumes on B.
// B's catch-up must compare its registration with the list at 11, which
// holds none: not the same state, so B does not reach A's version until its
// informer delivers the deletion (504 meanwhile). Compared as a source of
// no objects, the empty list looked like B's mirror: B answered "same
// state", sent the client nothing, and issued versions naming hub revision
// 11 with the candidate in team-a's view, a state the hub never held.
func TestMembershipCatchUpComparesTheRegistration(t *testing.T) {
	t.Parallel()
	hub := &hubRegistrations{}
	b, sink := canaryReplica(t, hub)
	cur, err := b.Read(func(Reader) {})
	if err != nil {
		t.Fatal(err)
	}
	hub.write(11, nil)
	atA := withMembership(t, b, cur, 11)

	_, same, err := b.ReachVersion(t.Context(), atA)
	if err == nil {
		t.Fatalf("B, registered in its mirror, reached A's %s (unregistered) with same=%v; team-a/g from %q there", atA, same, teamACandidate(t, b))
	}
	if !apierrors.IsTimeout(err) {
		t.Fatalf("B reaching A's %s: %v, want 504", atA, err)
	}
	last := memberClusterAt(11, map[string]string{"stage": "canary"})
	sink.Apply([]sourcefeed.Change{{Object: last, Deleted: true}}, 11)
	if _, same, err := b.ReachVersion(t.Context(), atA); err != nil || !same {
		t.Fatalf("B reaching A's %s after its informer delivered the deletion: same=%v, %v", atA, same, err)
	}
	if got := teamACandidate(t, b); got != "" {
		t.Errorf("unregistered: team-a/g from %q, want the stable g", got)
	}
}

// TestMembershipDropsTheLateRelabels: replica B found its registration
// equal to the hub's list at revision 12 (relabelled out of the canary
// clusters at 11 and back at 12, which its informer lags behind). When the
// informer then delivers 11 and 12, B changes nothing: the hub held B's
// registration at 12, and applied, the relabel at 11 would move team-a out
// of the canary and back, and name the registration by 11, older than the
// 12 the client resumed from (as a source's late writes, issue 38 case 4).
func TestMembershipDropsTheLateRelabels(t *testing.T) {
	t.Parallel()
	hub := &hubRegistrations{}
	b, sink := canaryReplica(t, hub)
	cur, err := b.Read(func(Reader) {})
	if err != nil {
		t.Fatal(err)
	}
	out := hub.write(11, map[string]string{"stage": "main"})
	back := hub.write(12, map[string]string{"stage": "canary"})
	atA := withMembership(t, b, cur, 12)
	if _, same, err := b.ReachVersion(t.Context(), atA); err != nil || !same {
		t.Fatalf("B reaching A's %s (its own registration, at 12): same=%v, %v", atA, same, err)
	}
	sink.Apply([]sourcefeed.Change{{Object: out}}, 11)
	now, err := b.Read(func(Reader) {})
	if err != nil {
		t.Fatal(err)
	}
	if o := rv.CompareStrings(atA, now); o != rv.Same && o != rv.Older {
		t.Errorf("after B's informer delivered the relabel at 11, B's version %s is %s than A's %s: want the same or later", now, o, atA)
	}
	if got := teamACandidate(t, b); got != "g.next" {
		t.Errorf("after the late relabel at 11: team-a/g from %q, want g.next (the hub held the canary registration at 12)", got)
	}
	sink.Apply([]sourcefeed.Change{{Object: back}}, 12)
	if got := teamACandidate(t, b); got != "g.next" {
		t.Errorf("after the late relabel at 12: team-a/g from %q, want g.next", got)
	}
	// The registration's next change after 12 applies.
	sink.Apply([]sourcefeed.Change{{Object: hub.write(13, map[string]string{"stage": "main"})}}, 13)
	if got := teamACandidate(t, b); got != "" {
		t.Errorf("relabelled out at 13: team-a/g from %q, want the stable g", got)
	}
}

// memberClusterAt is the registration at rev with labels.
func memberClusterAt(rev uint64, labels map[string]string) *unstructured.Unstructured {
	return (&hubRegistrations{}).write(rev, labels)
}

// TestResumeAllNamespacesInACanaryCluster: a watch of every namespace
// resumed from a version this replica has no history of (another
// replica's, before g.next was written) merges the current views from a
// copy of the mirror. The copy must hold the cluster's registration: made
// as an unregistered cluster's, it marked g.next out of the cluster, its
// team-a/g was the stable g, and the client, which holds the stable g,
// got no event and kept it at the current version, whose team-a sees
// g.next.
func TestResumeAllNamespacesInACanaryCluster(t *testing.T) {
	t.Parallel()
	hub := &hubRegistrations{}
	b, _ := canaryReplica(t, hub)
	ns := func(name, rv string, labels map[string]string) runtime.Object {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Labels: labels}}
	}
	b.SetNamespaceList(func(context.Context, string, string) ([]runtime.Object, error) {
		return []runtime.Object{ns(global, "1", nil), ns("team-a", "2", map[string]string{v1alpha1.LabelStage: "canary"})}, nil
	})
	b.SetSourceList("rolebindings", "", func(_ context.Context, version, _ string) ([]runtime.Object, error) {
		if version != "3" {
			t.Errorf("rolebindings listed at %s, want 3", version)
		}
		return []runtime.Object{&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: global, Name: "g", ResourceVersion: "3"}}}, nil
	})
	cur, err := b.Read(func(Reader) {})
	if err != nil {
		t.Fatal(err)
	}
	v, err := rv.Parse(cur)
	if err != nil {
		t.Fatal(err)
	}
	b.mu.RLock()
	k := b.pos.index("rolebindings")
	b.mu.RUnlock()
	v.Vector, v.Seq = append([]uint64(nil), v.Vector...), 0
	v.Vector[k] = 3                                                      // before g.next: team-a sees the stable g
	got := resumeEvents(t, b, WatchOptions{ResourceVersion: v.String()}) // every namespace
	want := []string{"ADDED implicit-global/g.next from ", "MODIFIED team-a/g from g.next"}
	if !slices.Equal(got, want) {
		t.Errorf("resumed from before g.next: events %q, want %q", got, want)
	}
}

// addCandidate adds the global stable name and its candidate name.next for
// the canary stage in the member clusters labelled stage canary.
func addCandidate(m *Mux, name string, rev int) {
	m.OnSource("rolebindings", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: global, Name: name, ResourceVersion: strconv.Itoa(rev)}}, false)
	m.OnSource("rolebindings", &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: global, Name: name + ".next", ResourceVersion: strconv.Itoa(rev + 1),
		Annotations: map[string]string{
			v1alpha1.AnnotationCandidateFor:   name,
			v1alpha1.AnnotationCanarySelector: v1alpha1.LabelStage + "=canary",
			v1alpha1.AnnotationCanaryClusters: "stage=canary",
		}}}, false)
}

// listsAsNow gives b the exact lists of its namespaces and of its
// RoleBindings as they are now (neither changes in these tests).
func listsAsNow(t *testing.T, b *Mux) {
	t.Helper()
	b.mu.RLock()
	var nss, rbs []runtime.Object
	for name, ns := range b.st.namespaces {
		nss = append(nss, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: ns.UID, Labels: ns.Labels, Annotations: ns.Annotations}})
	}
	for _, items := range b.st.sources["rolebindings"] {
		for _, it := range items {
			rbs = append(rbs, it.Object.(runtime.Object))
		}
	}
	b.mu.RUnlock()
	b.SetNamespaceList(func(context.Context, string, string) ([]runtime.Object, error) { return nss, nil })
	b.SetSourceList("rolebindings", "", func(_ context.Context, _, ns string) ([]runtime.Object, error) {
		var out []runtime.Object
		for _, o := range rbs {
			if ns == "" || o.(*rbacv1.RoleBinding).Namespace == ns {
				out = append(out, o)
			}
		}
		return out, nil
	})
}

// resumeEvents resumes a watch of opts from version and describes its
// events up to the bookmark.
func resumeEvents(t *testing.T, b *Mux, opts WatchOptions) []string {
	t.Helper()
	opts.Resource, opts.AllowBookmarks = "rolebindings", true
	w, err := b.Watch(t.Context(), opts)
	if err != nil {
		t.Fatalf("resuming %q from %s: %v", opts.Namespace, opts.ResourceVersion, err)
	}
	defer w.Stop()
	var got []string
	for ev := range w.ResultChan() {
		if ev.Type == watch.Bookmark {
			break
		}
		rb := ev.Object.(*rbacv1.RoleBinding)
		got = append(got, string(ev.Type)+" "+rb.Namespace+"/"+rb.Name+" from "+rb.Annotations[v1alpha1.AnnotationCandidate])
	}
	return got
}

// TestResumeOneNamespaceAcrossARelabel: team-a's views of a past state are
// merged with the cluster's registration at the version's hub revision. B
// is relabelled out of the canary clusters at 11: team-a's g and h leave
// g.next and h.next. A client of team-a at 10 (another replica's version:
// no history here) gets both back to the stable sources; one cut off after
// the relabel's first event in team-a (its version inside the change)
// gets the second. Merged as an unregistered cluster's, the past views
// already held the stable sources and neither client got an event; a past
// state inside the relabel was taken for one of another resource's
// changes, the same on both sides, and the second client got none either.
func TestResumeOneNamespaceAcrossARelabel(t *testing.T) {
	t.Parallel()
	hub := &hubRegistrations{}
	b, sink := canaryReplica(t, hub)
	addCandidate(b, "h", 5)
	listsAsNow(t, b)
	at10, err := b.Read(func(Reader) {})
	if err != nil {
		t.Fatal(err)
	}
	sink.Apply([]sourcefeed.Change{{Object: hub.write(11, map[string]string{"stage": "main"})}}, 11)
	now, err := b.Read(func(Reader) {})
	if err != nil {
		t.Fatal(err)
	}
	noHint := func(version string, mid *rv.Mid) string {
		v, err := rv.Parse(version)
		if err != nil {
			t.Fatal(err)
		}
		v.Seq, v.Mid = 0, mid
		return v.String()
	}
	got := resumeEvents(t, b, WatchOptions{Namespace: "team-a", ResourceVersion: noHint(at10, nil)})
	want := []string{"MODIFIED team-a/g from ", "MODIFIED team-a/h from "}
	if !slices.Equal(got, want) {
		t.Errorf("team-a resumed from before the relabel: %q, want %q", got, want)
	}
	b.mu.RLock()
	k := b.pos.index(b.membershipKey)
	b.mu.RUnlock()
	inside := noHint(now, &rv.Mid{K: k, Prev: 10, Index: 0, Namespace: "team-a"})
	got = resumeEvents(t, b, WatchOptions{Namespace: "team-a", ResourceVersion: inside})
	want = want[1:]
	if !slices.Equal(got, want) {
		t.Errorf("team-a resumed from %s, after the relabel's first event there: %q, want %q", inside, got, want)
	}
}
