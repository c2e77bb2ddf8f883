package exceptions_test

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/implicit-dev/implicit-apiserver/internal/testwait"
	"github.com/implicit-dev/implicit-apiserver/pkg/apis/implicit/v1alpha1"
	"github.com/implicit-dev/implicit-apiserver/pkg/exceptions"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// TestMarksAtTheEnd: nothing is written before an exception's end (the
// watcher sleeps until then); at the end the mark names the version's
// digest, and an Event says so.
func TestMarksAtTheEnd(t *testing.T) {
	t.Parallel()
	s := spec("ci", t0.Add(time.Hour))
	c := newCluster(namespace("team-a", []v1alpha1.ExceptionSpec{s, spec("open", time.Time{})}, nil))
	clk, rec := start(t, c, time.Minute)

	settle(t, clk)
	clk.Step(time.Hour - time.Second)
	settle(t, clk)
	if n := c.patchCount(); n != 0 {
		t.Fatalf("%d patches a second before the end, want none: %v", n, c.sent())
	}
	clk.Step(time.Second)
	testwait.For(t, "the mark", func() bool { return c.marks(t, "team-a") != nil })
	if got, want := c.marks(t, "team-a"), map[string]string{"ci": merge.ExceptionDigest(s)}; !reflect.DeepEqual(got, want) {
		t.Errorf("marks = %v, want %v", got, want)
	}
	if !strings.Contains(c.sent()[0], `"resourceVersion":"1"`) {
		t.Errorf("patch %s does not carry the namespace's resourceVersion", c.sent()[0])
	}
	testwait.For(t, "the ExceptionExpired Event", func() bool {
		for _, e := range events(rec) {
			if strings.Contains(e, exceptions.ReasonExpired) && strings.Contains(e, "exception ci") {
				return true
			}
		}
		return false
	})
	settle(t, clk)
	if n := c.patchCount(); n != 1 {
		t.Errorf("%d patches, want 1: %v", n, c.sent())
	}
}

// TestConflictRetried: a patch that conflicts is recomputed from a fresh
// read: a tenant's edit in between is kept and the mark written; another
// replica's mark in between leaves nothing to write.
func TestConflictRetried(t *testing.T) {
	t.Parallel()
	s := spec("ci", t0.Add(-time.Second))
	tests := []struct {
		name        string
		other       func(*corev1.Namespace)
		wantPatches int
		wantLabel   string
	}{{
		name:        "a tenant's edit",
		other:       func(ns *corev1.Namespace) { ns.Annotations["note"] = "edited" },
		wantPatches: 2,
		wantLabel:   "edited",
	}, {
		name: "another replica's mark",
		other: func(ns *corev1.Namespace) {
			ns.Annotations[v1alpha1.AnnotationExceptionsExpired] = `{"ci":"` + merge.ExceptionDigest(s) + `"}`
		},
		wantPatches: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(namespace("team-a", []v1alpha1.ExceptionSpec{s}, nil))
			c.before = func(n int) {
				if n == 1 {
					c.edit(t, "team-a", tt.other)
				}
			}
			clk, _ := start(t, c, time.Minute)
			testwait.For(t, "the mark", func() bool { return c.marks(t, "team-a")["ci"] == merge.ExceptionDigest(s) })
			settle(t, clk)
			if n := c.patchCount(); n != tt.wantPatches {
				t.Errorf("%d patches, want %d: %v", n, tt.wantPatches, c.sent())
			}
			if tt.wantLabel != "" {
				cur, _ := c.Tracker().Get(nsGVR, "", "team-a")
				if got := cur.(*corev1.Namespace).Annotations["note"]; got != tt.wantLabel {
					t.Errorf("the tenant's edit was lost: note = %q", got)
				}
			}
		})
	}
}

// TestMarksOfRemovedExceptionsDropped: marks of exceptions no longer
// declared are dropped with the next write, marks of declared ones kept;
// while the exceptions annotation does not parse, no mark is dropped.
func TestMarksOfRemovedExceptionsDropped(t *testing.T) {
	t.Parallel()
	kept, ended := spec("kept", t0.Add(-time.Hour)), spec("ended", t0.Add(-time.Second))
	c := newCluster(
		namespace("team-a", []v1alpha1.ExceptionSpec{kept, ended}, map[string]string{"kept": merge.ExceptionDigest(kept), "gone": "0123"}),
		namespace("team-b", nil, map[string]string{"gone": "0123"}),
	)
	c.edit(t, "team-b", func(ns *corev1.Namespace) { ns.Annotations[v1alpha1.AnnotationExceptions] = "not json" })
	clk, _ := start(t, c, time.Minute)
	testwait.For(t, "team-a's marks", func() bool { return c.marks(t, "team-a")["ended"] != "" })
	want := map[string]string{"kept": merge.ExceptionDigest(kept), "ended": merge.ExceptionDigest(ended)}
	if got := c.marks(t, "team-a"); !reflect.DeepEqual(got, want) {
		t.Errorf("team-a's marks = %v, want %v", got, want)
	}
	settle(t, clk)
	if got := c.marks(t, "team-b"); !reflect.DeepEqual(got, map[string]string{"gone": "0123"}) {
		t.Errorf("team-b's marks = %v, want them kept while its exceptions do not parse", got)
	}
	c.edit(t, "team-b", func(ns *corev1.Namespace) { delete(ns.Annotations, v1alpha1.AnnotationExceptions) })
	testwait.For(t, "team-b's marks removed", func() bool { return c.marks(t, "team-b") == nil })
}

// TestWarnsOnce: an exception entering the warning window is warned of
// once, however often the writer looks again.
func TestWarnsOnce(t *testing.T) {
	t.Parallel()
	c := newCluster(namespace("team-a", []v1alpha1.ExceptionSpec{spec("ci", t0.Add(3*time.Hour))}, nil))
	clk, rec := start(t, c, 2*time.Hour)
	settle(t, clk)
	if got := events(rec); len(got) != 0 {
		t.Fatalf("events before the window: %v", got)
	}
	clk.Step(time.Hour)
	settle(t, clk)
	var warned []string
	testwait.For(t, "the warning", func() bool {
		warned = append(warned, events(rec)...)
		return len(warned) > 0
	})
	for range 3 {
		clk.Step(exceptions.DefaultResync)
		settle(t, clk)
	}
	warned = append(warned, events(rec)...)
	if len(warned) != 1 || !strings.Contains(warned[0], "Warning "+exceptions.ReasonExpiresSoon) {
		t.Errorf("events = %q, want one %s", warned, exceptions.ReasonExpiresSoon)
	}
}

// TestStateAskedOncePerResync: the views are asked an exception's state
// (StateOf, for the gauge) once per Resync, however many namespace
// changes wake the writer meanwhile; again once Resync has passed.
func TestStateAskedOncePerResync(t *testing.T) {
	t.Parallel()
	c := newCluster(
		namespace("team-a", []v1alpha1.ExceptionSpec{spec("ci", t0.Add(time.Hour))}, nil),
		namespace("team-b", []v1alpha1.ExceptionSpec{spec("other", time.Time{})}, nil),
	)
	var mu sync.Mutex
	asked := map[string]int{}
	count := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return asked[name]
	}
	clk, _ := start(t, c, time.Minute, func(cfg *exceptions.Config) {
		cfg.StateOf = func(_ *corev1.Namespace, e merge.Exception) string {
			mu.Lock()
			defer mu.Unlock()
			asked[e.Name]++
			return v1alpha1.ExceptionRequested
		}
	})
	testwait.For(t, "the first look", func() bool { return count("ci") == 1 })
	for i := range 3 {
		// Each edit makes a new version of team-b's exception: the writer
		// looks again, and asks that version's state (proving it looked).
		c.edit(t, "team-b", func(ns *corev1.Namespace) {
			other := spec("other", time.Time{})
			other.Reason = fmt.Sprintf("edit %d", i)
			ns.Annotations[v1alpha1.AnnotationExceptions] = namespace("x", []v1alpha1.ExceptionSpec{other}, nil).Annotations[v1alpha1.AnnotationExceptions]
		})
		testwait.For(t, "the writer to look again", func() bool { return count("other") == i+2 })
	}
	settle(t, clk)
	if n := count("ci"); n != 1 {
		t.Errorf("ci's state asked %d times within Resync, want 1", n)
	}
	clk.Step(exceptions.DefaultResync)
	testwait.For(t, "the look after Resync", func() bool { return count("ci") == 2 })
}
