package accessreview

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/utils/clock"
)

// Tenant is the fairness group of a user: the namespace of a ServiceAccount
// (whoever administers a namespace can mint as many ServiceAccounts in it
// as they like, so they share one turn), else the user's own name.
func Tenant(user authenticationv1.UserInfo) string {
	if ns, _, err := serviceaccount.SplitUsername(user.Username); err == nil {
		return "serviceaccounts:" + ns
	}
	return "user:" + user.Username
}

// fairQueue hands out the tokens of one rate limit (qps, burst) to waiting
// questions in turn: round-robin over the tenants with questions waiting,
// and within a tenant round-robin over its users; one user's questions go
// in the order they came. A tenant with a flood of questions thus takes one
// token in as many as there are tenants waiting, and the others wait at
// most one round for theirs. It is work-conserving: a lone tenant gets the
// whole rate. At most maxWaiting questions of one tenant wait; more are
// refused (ErrTooManyWaiting).
//
// There is no goroutine of its own: a question that arrives dispatches
// what the bucket holds, and when it is empty a timer (the clock's
// AfterFunc) dispatches again once the next token is due. mu guards
// everything below it.
type fairQueue struct {
	clock      clock.WithDelayedExecution
	qps        float64
	burst      float64
	maxWaiting int

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	timer   bool // a dispatch is scheduled
	tenants []*tenantQueue
	next    int // index into tenants of the next turn
}

// tenantQueue is one tenant's waiting questions, by user.
type tenantQueue struct {
	name    string
	users   []*userQueue
	next    int
	waiting int
}

type userQueue struct {
	name    string
	waiters []*waiter
}

type waiter struct {
	ready    chan struct{}
	released bool
}

func newFairQueue(c clock.WithDelayedExecution, qps float64, burst, maxWaiting int) *fairQueue {
	return &fairQueue{clock: c, qps: qps, burst: float64(burst), maxWaiting: maxWaiting, tokens: float64(burst), last: c.Now()}
}

// ErrTooManyWaiting is returned for a question of a tenant that already
// has as many waiting as a tenant may.
var ErrTooManyWaiting = fmt.Errorf("too many access reviews of the same requester waiting")

// wait returns once the question of user may be asked, or with ctx's error.
func (q *fairQueue) wait(ctx context.Context, user authenticationv1.UserInfo) error {
	tenant := Tenant(user)
	q.mu.Lock()
	t := q.tenantLocked(tenant)
	if t.waiting >= q.maxWaiting {
		q.mu.Unlock()
		return fmt.Errorf("%w: %d of %s", ErrTooManyWaiting, t.waiting, tenant)
	}
	w := &waiter{ready: make(chan struct{})}
	u := q.userLocked(t, user.Username)
	u.waiters = append(u.waiters, w)
	t.waiting++
	q.dispatchLocked()
	q.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !w.released {
		q.removeLocked(tenant, user.Username, w)
	}
	return ctx.Err()
}

// waitingCount is how many questions wait, for tests.
func (q *fairQueue) waitingCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, t := range q.tenants {
		n += t.waiting
	}
	return n
}

func (q *fairQueue) tenantLocked(name string) *tenantQueue {
	for _, t := range q.tenants {
		if t.name == name {
			return t
		}
	}
	t := &tenantQueue{name: name}
	q.tenants = append(q.tenants, t)
	return t
}

func (q *fairQueue) userLocked(t *tenantQueue, name string) *userQueue {
	for _, u := range t.users {
		if u.name == name {
			return u
		}
	}
	u := &userQueue{name: name}
	t.users = append(t.users, u)
	return u
}

// refillLocked adds the tokens earned since the last refill.
func (q *fairQueue) refillLocked() {
	now := q.clock.Now()
	q.tokens = min(q.burst, q.tokens+now.Sub(q.last).Seconds()*q.qps)
	q.last = now
}

// dispatchLocked releases waiting questions while tokens last, in turn,
// and schedules the next dispatch when questions are left waiting.
func (q *fairQueue) dispatchLocked() {
	for len(q.tenants) > 0 {
		q.refillLocked()
		if q.tokens < 1 {
			if !q.timer {
				q.timer = true
				due := time.Duration((1 - q.tokens) / q.qps * float64(time.Second))
				// AfterFunc may run its function with the clock's own lock
				// held (the fake clock does): dispatch from a goroutine.
				q.clock.AfterFunc(max(due, time.Millisecond), func() { go q.tick() })
			}
			return
		}
		q.tokens--
		q.popLocked()
	}
}

func (q *fairQueue) tick() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.timer = false
	q.dispatchLocked()
}

// popLocked releases the next waiter in turn: the next tenant's next
// user's oldest question.
func (q *fairQueue) popLocked() {
	q.next %= len(q.tenants)
	ti := q.next
	t := q.tenants[ti]
	t.next %= len(t.users)
	ui := t.next
	u := t.users[ui]
	w := u.waiters[0]
	u.waiters = u.waiters[1:]
	t.waiting--
	w.released = true
	close(w.ready)
	// The next turn goes to the next user and the next tenant; an emptied
	// queue leaves the ring, and the turn stays at its index.
	t.next = ui + 1
	if len(u.waiters) == 0 {
		t.users = slices.Delete(t.users, ui, ui+1)
		t.next = ui
	}
	q.next = ti + 1
	if len(t.users) == 0 {
		q.tenants = slices.Delete(q.tenants, ti, ti+1)
		q.next = ti
	}
}

// removeLocked takes a waiter that gave up out of its queue.
func (q *fairQueue) removeLocked(tenant, user string, w *waiter) {
	ti := slices.IndexFunc(q.tenants, func(t *tenantQueue) bool { return t.name == tenant })
	if ti < 0 {
		return
	}
	t := q.tenants[ti]
	ui := slices.IndexFunc(t.users, func(u *userQueue) bool { return u.name == user })
	if ui < 0 {
		return
	}
	u := t.users[ui]
	i := slices.Index(u.waiters, w)
	if i < 0 {
		return
	}
	u.waiters = slices.Delete(u.waiters, i, i+1)
	t.waiting--
	if len(u.waiters) == 0 {
		t.users = slices.Delete(t.users, ui, ui+1)
		if t.next > ui {
			t.next--
		}
	}
	if len(t.users) == 0 {
		q.tenants = slices.Delete(q.tenants, ti, ti+1)
		if q.next > ti {
			q.next--
		}
	}
}

// FairQueue shares one rate limit fairly between requesters, as the
// reviews' queue does, for other expensive work done on a requester's
// behalf (the views' past states: pkg/apiserver).
type FairQueue struct{ q *fairQueue }

// NewFairQueue returns a FairQueue of qps and burst, with at most
// maxWaiting requests of one tenant waiting.
func NewFairQueue(c clock.WithDelayedExecution, qps float64, burst, maxWaiting int) *FairQueue {
	return &FairQueue{q: newFairQueue(c, qps, burst, maxWaiting)}
}

// Wait returns once user's request may go on, or with ctx's error, or
// ErrTooManyWaiting.
func (f *FairQueue) Wait(ctx context.Context, user authenticationv1.UserInfo) error {
	return f.q.wait(ctx, user)
}
