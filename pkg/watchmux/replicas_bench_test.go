package watchmux_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// BenchmarkReplicaSwitch measures what a client of every namespace costs
// when its watch moves to a replica that did not issue its version (another
// replica, or one restarted since), one global edit behind: the replica
// lists the sources at the version's revisions, merges the views and sends
// the difference (one event per namespace). Against it, relist: the same
// client listing again, sent every item of every namespace's view. Each
// resume is from a new version, so none is served from the cache of past
// states. In process, with the fake cluster's exact lists: no network, no
// encoding (docs/benchmarks.md, "Replica switch").
func BenchmarkReplicaSwitch(b *testing.B) {
	for _, size := range []struct{ namespaces, globals int }{{100, 10}, {1000, 10}, {1000, 100}} {
		b.Run(fmt.Sprintf("%dx%d", size.namespaces, size.globals), func(b *testing.B) {
			c := &fakeCluster{}
			c.write("namespaces", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: global, UID: "uid-global"}}, false)
			for i := range size.namespaces {
				name := fmt.Sprintf("team-%05d", i)
				c.write("namespaces", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}, false)
			}
			rb := func(i, edit int) *rbacv1.RoleBinding {
				name := fmt.Sprintf("g-%03d", i)
				return &rbacv1.RoleBinding{
					ObjectMeta: metav1.ObjectMeta{Namespace: global, Name: name, UID: types.UID("uid-" + name)},
					RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
					Subjects:   []rbacv1.Subject{{Kind: "User", Name: fmt.Sprintf("u-%d", edit)}},
				}
			}
			for i := range size.globals {
				c.write(rolebindings, rb(i, 0), false)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			a := c.startReplica(rng)
			other := c.startReplica(rng)
			read := func(w watch.Interface) int {
				n := 0
				for ev := range w.ResultChan() {
					if ev.Type == watch.Bookmark {
						w.Stop()
						break
					}
					n++
				}
				return n
			}
			b.Run("resume", func(b *testing.B) {
				events := 0
				edit := 0
				for b.Loop() {
					b.StopTimer()
					before, err := a.Read(func(watchmux.Reader) {})
					if err != nil {
						b.Fatal(err)
					}
					edit++
					ch := c.write(rolebindings, rb(edit%size.globals, edit), false)
					feedChange(a, ch)
					feedChange(other, ch)
					b.StartTimer()
					w, err := other.Watch(b.Context(), watchmux.WatchOptions{Resource: rolebindings, ResourceVersion: before, AllowBookmarks: true})
					if err != nil {
						b.Fatal(err)
					}
					events += read(w)
				}
				b.ReportMetric(float64(events)/float64(b.N), "events/op")
			})
			b.Run("relist", func(b *testing.B) {
				items := 0
				yes := true
				for b.Loop() {
					w, err := other.Watch(b.Context(), watchmux.WatchOptions{Resource: rolebindings, SendInitialEvents: &yes, AllowBookmarks: true})
					if err != nil {
						b.Fatal(err)
					}
					items += read(w)
				}
				b.ReportMetric(float64(items)/float64(b.N), "items/op")
			})
		})
	}
}
