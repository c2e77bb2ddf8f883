package server

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// fakeReviews stands for the delegating authorizer: it allows what grants
// says (user/namespace, namespace "" for cluster-wide) and counts the
// reviews it is asked.
type fakeReviews struct {
	mu      sync.Mutex
	grants  map[string]bool
	reviews map[string]int // by namespace ("" cluster-wide)
}

func (f *fakeReviews) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reviews[a.GetNamespace()]++
	if f.grants[a.GetUser().GetName()+"/"+a.GetNamespace()] || f.grants[a.GetUser().GetName()+"/"] {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

func (f *fakeReviews) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(f.Authorize(ctx, a))
}

func (f *fakeReviews) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

func (f *fakeReviews) count(ns string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reviews[ns]
}

func (f *fakeReviews) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.reviews {
		n += c
	}
	return n
}

func watchOf(userName, ns string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{
		User: &user.DefaultInfo{Name: userName, Groups: []string{"system:authenticated"}}, Verb: "watch",
		Namespace: ns, APIGroup: "implicit.dev", APIVersion: "v1alpha1", Resource: "rolebindings", ResourceRequest: true,
	}
}

// TestClusterWideReadsOneReviewForManyNamespaces: a user allowed in every
// namespace opens the watches of 1,000 namespaces with a handful of
// reviews, not one per namespace (the delegating authorizer's cache is
// keyed by namespace).
func TestClusterWideReadsOneReviewForManyNamespaces(t *testing.T) {
	t.Parallel()
	f := &fakeReviews{grants: map[string]bool{"controller/": true}, reviews: map[string]int{}}
	c := newClusterWideReads(f, 10*time.Second, 10*time.Second)
	for i := range 1000 {
		d, _, err := c.Authorize(t.Context(), watchOf("controller", fmt.Sprintf("team-%d", i)))
		if err != nil || d != authorizer.DecisionAllow {
			t.Fatalf("team-%d: %v %v, want allowed", i, d, err)
		}
	}
	if n := f.total(); n > 2 {
		t.Errorf("%d reviews for 1,000 namespaces of a user allowed cluster-wide, want 2 (the first namespace, then the cluster-wide one)", n)
	}
}

// TestClusterWideReadsTenant: a tenant reading its own namespace is
// authorized per namespace, without a cluster-wide review; a user allowed
// in two namespaces only keeps both allowed and others refused.
func TestClusterWideReadsTenant(t *testing.T) {
	t.Parallel()
	f := &fakeReviews{grants: map[string]bool{"alice/team-a": true, "bob/team-b": true, "bob/team-c": true}, reviews: map[string]int{}}
	c := newClusterWideReads(f, 10*time.Second, 10*time.Second)
	for range 3 {
		if d, _, _ := c.Authorize(t.Context(), watchOf("alice", "team-a")); d != authorizer.DecisionAllow {
			t.Fatalf("alice in team-a: %v, want allowed", d)
		}
	}
	if n := f.count(""); n != 0 {
		t.Errorf("%d cluster-wide reviews for a tenant reading one namespace, want 0", n)
	}
	for _, tc := range []struct {
		ns    string
		allow bool
	}{{"team-b", true}, {"team-c", true}, {"team-a", false}, {"team-b", true}, {"team-d", false}} {
		d, _, _ := c.Authorize(t.Context(), watchOf("bob", tc.ns))
		if got := d == authorizer.DecisionAllow; got != tc.allow {
			t.Errorf("bob in %s: %v, want allowed %v", tc.ns, d, tc.allow)
		}
	}
	if n := f.count(""); n != 1 {
		t.Errorf("%d cluster-wide reviews for bob, want 1 (its deny is remembered)", n)
	}
}

// TestClusterWideReadsOnlyReads: writes and non-resource requests go to
// the inner authorizer each time, whatever the user may do cluster-wide.
func TestClusterWideReadsOnlyReads(t *testing.T) {
	t.Parallel()
	f := &fakeReviews{grants: map[string]bool{"controller/": true}, reviews: map[string]int{}}
	c := newClusterWideReads(f, 10*time.Second, 10*time.Second)
	for i := range 10 {
		a := watchOf("controller", fmt.Sprintf("team-%d", i))
		a.Verb = "delete"
		c.Authorize(t.Context(), a)
	}
	if n := f.total(); n != 10 {
		t.Errorf("%d reviews for 10 deletes, want 10", n)
	}
}

// TestClusterWideReadsExpires: a cluster-wide allow is reused for its TTL
// only; then the next namespace is reviewed again.
func TestClusterWideReadsExpires(t *testing.T) {
	t.Parallel()
	f := &fakeReviews{grants: map[string]bool{"controller/": true}, reviews: map[string]int{}}
	c := newClusterWideReads(f, 10*time.Second, 10*time.Second)
	now := time.Now()
	c.now = func() time.Time { return now }
	c.Authorize(t.Context(), watchOf("controller", "team-1"))
	c.Authorize(t.Context(), watchOf("controller", "team-2"))
	c.Authorize(t.Context(), watchOf("controller", "team-3"))
	before := f.total()
	// Revoked cluster-wide, and the allow has expired.
	f.mu.Lock()
	delete(f.grants, "controller/")
	f.mu.Unlock()
	now = now.Add(11 * time.Second)
	if d, _, _ := c.Authorize(t.Context(), watchOf("controller", "team-4")); d == authorizer.DecisionAllow {
		t.Errorf("team-4 allowed after the cluster-wide allow expired and was revoked")
	}
	if f.total() == before {
		t.Errorf("no review after the cluster-wide allow expired")
	}
}

// slowReviews is fakeReviews whose reviews take delay, as a
// SubjectAccessReview through kube-apiserver does.
type slowReviews struct {
	*fakeReviews
	delay time.Duration
}

func (s slowReviews) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	time.Sleep(s.delay)
	return s.fakeReviews.Authorize(ctx, a)
}

// TestClusterWideReadsStorm: a reconnect storm's reads of 1,000 namespaces
// arriving together, after the user's first namespace, wait for one
// cluster-wide review instead of each sending its own; a user denied
// cluster-wide has each of its namespaces reviewed after the one
// cluster-wide denial.
func TestClusterWideReadsStorm(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		user       string
		grants     map[string]bool
		allow      bool
		namespaced int // reviews per namespace after the first
	}{
		{"controller", map[string]bool{"controller/": true}, true, 0},
		{"bob", map[string]bool{"bob/team-0": true}, false, 1},
	} {
		f := &fakeReviews{grants: tc.grants, reviews: map[string]int{}}
		c := newClusterWideReads(slowReviews{f, 50 * time.Millisecond}, 10*time.Second, 10*time.Second)
		c.Authorize(t.Context(), watchOf(tc.user, "team-0"))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := 1; i <= 1000; i++ {
			wg.Go(func() {
				<-start
				d, _, err := c.Authorize(t.Context(), watchOf(tc.user, fmt.Sprintf("team-%d", i)))
				if got := err == nil && d == authorizer.DecisionAllow; got != tc.allow {
					t.Errorf("%s in team-%d: %v %v, want allowed %v", tc.user, i, d, err, tc.allow)
				}
			})
		}
		close(start)
		wg.Wait()
		if n := f.count(""); n != 1 {
			t.Errorf("%s: %d cluster-wide reviews for 1,000 namespaces read at once, want 1", tc.user, n)
		}
		if n, want := f.total()-f.count("")-1, 1000*tc.namespaced; n != want {
			t.Errorf("%s: %d namespace reviews after the first, want %d", tc.user, n, want)
		}
	}
}
