package watchmux_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/implicit-dev/implicit-apiserver/pkg/watchmux"
)

// BenchmarkReplicaSwitchNamespace is BenchmarkReplicaSwitch for a client of
// one namespace: its watch moves to a replica without history for its
// version, one global edit behind, in a cluster of namespaces × globals
// with one local RoleBinding in every namespace. It reports what the
// replica listed from the fake kube-apiserver per resume (lists, objects)
// and the time; each resume is from a new version, in the next namespace.
func BenchmarkReplicaSwitchNamespace(b *testing.B) {
	for _, size := range []struct{ namespaces, globals int }{{1000, 100}} {
		b.Run(fmt.Sprintf("%dx%d", size.namespaces, size.globals), func(b *testing.B) {
			c := &fakeCluster{}
			c.write("namespaces", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: global, UID: "uid-global"}}, false)
			rb := func(ns, name string, edit int) *rbacv1.RoleBinding {
				return &rbacv1.RoleBinding{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name)},
					RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "view"},
					Subjects:   []rbacv1.Subject{{Kind: "User", Name: fmt.Sprintf("u-%d", edit)}},
				}
			}
			var names []string
			for i := range size.namespaces {
				name := fmt.Sprintf("team-%05d", i)
				names = append(names, name)
				c.write("namespaces", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}, false)
				c.write(rolebindings, rb(name, "local", 0), false)
			}
			for i := range size.globals {
				c.write(rolebindings, rb(global, fmt.Sprintf("g-%03d", i), 0), false)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			a := c.startReplica(rng)
			other := c.startReplica(rng)
			c.mu.Lock()
			c.lists = nil
			c.mu.Unlock()
			events, edit := 0, 0
			for b.Loop() {
				b.StopTimer()
				before, err := a.Read(func(watchmux.Reader) {})
				if err != nil {
					b.Fatal(err)
				}
				edit++
				ch := c.write(rolebindings, rb(global, fmt.Sprintf("g-%03d", edit%size.globals), edit), false)
				feedChange(a, ch)
				feedChange(other, ch)
				b.StartTimer()
				w, err := other.Watch(b.Context(), watchmux.WatchOptions{Resource: rolebindings, Namespace: names[edit%len(names)], ResourceVersion: before, AllowBookmarks: true})
				if err != nil {
					b.Fatal(err)
				}
				for ev := range w.ResultChan() {
					if ev.Type == "BOOKMARK" {
						w.Stop()
						break
					}
					events++
				}
			}
			c.mu.Lock()
			lists, objects := len(c.lists), 0
			for _, l := range c.lists {
				objects += l.objects
			}
			c.mu.Unlock()
			b.ReportMetric(float64(events)/float64(b.N), "events/op")
			b.ReportMetric(float64(lists)/float64(b.N), "lists/op")
			b.ReportMetric(float64(objects)/float64(b.N), "objects-listed/op")
		})
	}
}
