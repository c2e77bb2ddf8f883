package watchmux_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// memberCluster is the registration of member on the hub, at rv.
func memberCluster(member, rv string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("fleet.implicit.dev/v1alpha1")
	u.SetKind("MemberCluster")
	u.SetName(member)
	u.SetResourceVersion(rv)
	u.SetLabels(labels)
	return u
}

// inClusters makes a source's candidate one of the clusters selector
// selects.
func inClusters(selector string) objOpt {
	return func(m *metav1.ObjectMeta) { m.Annotations[v1alpha1.AnnotationCanaryClusters] = selector }
}

// TestCanaryClusters: a candidate with implicit.dev/canary-clusters exists
// only in a cluster whose registration it selects. Unregistered, it
// reaches nobody; registered with matching labels, the canaries see it;
// relabelled away, they see the stable source again, each move one event
// per canary view and none elsewhere.
func TestCanaryClusters(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	m := newMux(watchmux.Options{})
	for _, s := range []step{
		addNS(namespace(global)),
		addNS(namespace("org")),
		addNS(namespace("team-a", parent("org"), stage("canary"))),
		addNS(namespace("team-b", parent("org"), stage("prod"))),
		putRB(global, "g"),
		putRB(global, "g.next", candidateFor("g", v1alpha1.LabelStage+"=canary"), inClusters("implicit.dev/cluster-stage=canary")),
	} {
		s(m)
	}
	fw := watch.NewFake()
	informer := cache.NewSharedIndexInformer(fakeRegistrationLW{fw}, &unstructured.Unstructured{}, 0, cache.Indexers{})
	if err := m.AddMembership("member-1", "hub", informer, nil, nil); err != nil {
		t.Fatal(err)
	}
	go informer.Run(ctx.Done())
	testwait.For(t, "the membership informer syncs", informer.HasSynced)
	m.MarkSynced()

	canaryView := func() string {
		t.Helper()
		views, _ := readViews(t, m, rolebindings)
		var out []string
		for k, v := range views {
			if strings.HasPrefix(k, "team-") {
				from := "g"
				if strings.Contains(v, "g.next") {
					from = "g.next"
				}
				out = append(out, k+" from "+from)
			}
		}
		slices.Sort(out)
		return strings.Join(out, "; ")
	}
	stable := "team-a/g from g; team-b/g from g"
	if got := canaryView(); got != stable {
		t.Fatalf("unregistered: %s, want the stable source everywhere: %s", got, stable)
	}

	before := currentRV(t, m)
	fw.Add(memberCluster("member-1", "10", map[string]string{"implicit.dev/cluster-stage": "canary"}))
	testwait.For(t, "the registration's events", func() bool { return currentRV(t, m) > before })
	f := watchAndFollow(t, m, watchmux.WatchOptions{ResourceVersion: rvText(before)})
	evs := f.waitFor(t, 1)
	if len(evs) != 1 || !strings.Contains(describeStaged(evs[0]), "team-a/g") || !strings.Contains(describeStaged(evs[0]), "candidate=g.next") {
		t.Fatalf("registered in the canary clusters: events %v, want one MODIFIED of team-a/g from g.next", describeEvents(evs))
	}
	if got, want := canaryView(), "team-a/g from g.next; team-b/g from g"; got != want {
		t.Fatalf("registered in the canary clusters: %s, want %s", got, want)
	}

	before = currentRV(t, m)
	fw.Modify(memberCluster("member-1", "11", map[string]string{"implicit.dev/cluster-stage": "canary", "region": "eu"}))
	fw.Modify(memberCluster("member-1", "12", map[string]string{"implicit.dev/cluster-stage": "main"}))
	testwait.For(t, "the relabel's events", func() bool { return currentRV(t, m) > before })
	f = watchAndFollow(t, m, watchmux.WatchOptions{ResourceVersion: rvText(before)})
	evs = f.waitFor(t, 1)
	if len(evs) != 1 || !strings.Contains(describeStaged(evs[0]), "team-a/g") || strings.Contains(describeStaged(evs[0]), "candidate=") {
		t.Fatalf("relabelled out of the canary clusters: events %v, want one MODIFIED of team-a/g back to g (a relabel that keeps the cluster selected makes none)", describeEvents(evs))
	}
	if got := canaryView(); got != stable {
		t.Fatalf("relabelled out: %s, want %s", got, stable)
	}

	before = currentRV(t, m)
	fw.Modify(memberCluster("member-1", "13", map[string]string{"implicit.dev/cluster-stage": "canary"}))
	fw.Delete(memberCluster("member-1", "14", map[string]string{"implicit.dev/cluster-stage": "canary"}))
	testwait.For(t, "the registration's deletion", func() bool { return currentRV(t, m) >= before+2 })
	if got := canaryView(); got != stable {
		t.Fatalf("registration deleted: %s, want %s", got, stable)
	}
}

// fakeRegistrationLW lists no registration, then watches w: a reflector
// that lists and watches (no watch-list).
type fakeRegistrationLW struct{ w *watch.FakeWatcher }

func (fakeRegistrationLW) IsWatchListSemanticsUnSupported() bool { return true }

func (fakeRegistrationLW) List(metav1.ListOptions) (runtime.Object, error) {
	return &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "fleet.implicit.dev/v1alpha1", "kind": "MemberClusterList", "metadata": map[string]any{"resourceVersion": "1"}}}, nil
}

func (l fakeRegistrationLW) Watch(metav1.ListOptions) (watch.Interface, error) { return l.w, nil }
