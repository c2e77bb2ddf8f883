package admission

import (
	"context"
	"net/http"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/implicit-dev/implicit-apiserver/pkg/accessreview"
)

// tenantTurns lets each tenant (accessreview.Tenant: a user, or the
// ServiceAccounts of one namespace) have one decision in flight at a time;
// the tenant's others wait their turn, first come first served, before
// they start. The parents guard decides one change at a time under one
// lock (hierarchy.go), asking access reviews while it holds it: without
// turns, ten concurrent requests of one tenant queue ten times their
// access reviews ahead of every other tenant's change. With them, another
// tenant waits behind at most one decision of each tenant.
type tenantTurns struct {
	mu    sync.Mutex
	slots map[string]*turn
}

// turn is one tenant's: holding it is a value in ch; users counts the
// decisions holding or waiting for it, so that an unused turn is dropped.
type turn struct {
	ch    chan struct{}
	users int
}

func newTenantTurns() *tenantTurns { return &tenantTurns{slots: map[string]*turn{}} }

// take waits for user's tenant's turn, or for ctx to end (false).
func (t *tenantTurns) take(ctx context.Context, user authenticationv1.UserInfo) (release func(), ok bool) {
	tenant := accessreview.Tenant(user)
	t.mu.Lock()
	s := t.slots[tenant]
	if s == nil {
		s = &turn{ch: make(chan struct{}, 1)}
		t.slots[tenant] = s
	}
	s.users++
	t.mu.Unlock()
	done := func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if s.users--; s.users == 0 {
			delete(t.slots, tenant)
		}
	}
	select {
	case s.ch <- struct{}{}:
		return func() { <-s.ch; done() }, true
	case <-ctx.Done():
		done()
		return nil, false
	}
}

// inTurn decides with decide once user's tenant has its turn.
func (t *tenantTurns) inTurn(decide func(context.Context, *admissionv1.AdmissionRequest) decision) func(context.Context, *admissionv1.AdmissionRequest) decision {
	return func(ctx context.Context, req *admissionv1.AdmissionRequest) decision {
		release, ok := t.take(ctx, req.UserInfo)
		if !ok {
			d := deny("refused for now: another namespace change of %s was still being decided when this one gave up waiting; retry later", accessreview.Tenant(req.UserInfo))
			d.code = http.StatusTooManyRequests
			return d
		}
		defer release()
		return decide(ctx, req)
	}
}
