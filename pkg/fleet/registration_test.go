package fleet_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/fleet"
)

// TestRegistration follows the member's MemberCluster: absent, registered
// with labels, relabeled, unregistered; another member's is no concern.
func TestRegistration(t *testing.T) {
	client := newClient(memberCluster("member-2", map[string]string{"stage": "main"}))
	r := fleet.NewRegistration(client, "member-1")
	var changes atomic.Int32
	r.OnChange(func() { changes.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s", what)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	waitFor("the registration to sync", r.HasSynced)
	if l, ok := r.Labels(); ok || len(l) != 0 {
		t.Fatalf("before registration: %v, %v; want not registered", l, ok)
	}
	mcs := client.Resource(memberGVR)
	if _, err := mcs.Create(ctx, memberCluster("member-1", map[string]string{"stage": "canary"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the registration", func() bool { l, ok := r.Labels(); return ok && l["stage"] == "canary" })
	waitFor("one change", func() bool { return changes.Load() == 1 })

	u, err := mcs.Get(ctx, "member-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetAnnotations(map[string]string{"note": "not a label"}) // no change of labels
	if u, err = mcs.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	u.SetLabels(map[string]string{"stage": "main"})
	if _, err = mcs.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	other, err := mcs.Get(ctx, "member-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other.SetLabels(map[string]string{"stage": "other"}) // the fake ignores field selectors
	if _, err = mcs.Update(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the new labels", func() bool { l, _ := r.Labels(); return l["stage"] == "main" })
	time.Sleep(100 * time.Millisecond) // member-2's update reaches the informer too
	if l, ok := r.Labels(); !ok || l["stage"] != "main" {
		t.Errorf("after member-2's update: %v, %v; want member-1's labels", l, ok)
	}
	if n := changes.Load(); n != 2 {
		t.Errorf("%d changes after an annotation and a label change, want 2", n)
	}
	if err := mcs.Delete(ctx, "member-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the unregistration", func() bool { _, ok := r.Labels(); return !ok })
	if n := changes.Load(); n != 3 {
		t.Errorf("%d changes after the deletion, want 3", n)
	}
}
