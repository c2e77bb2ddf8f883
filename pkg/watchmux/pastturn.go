package watchmux

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	rv "github.com/implicit-dev/implicit-apiserver/pkg/resourceversion"
)

// Turns to list past states (Options.PastStates, issue 38, case 8). Each
// version a client makes up costs kube-apiserver and etcd exact lists, so
// those lists wait for the requester's turn; nothing else does. A version
// that names the current state, or one a catch-up found equal to it, is
// answered before any past state is asked for; a past state kept by the
// caches (pastCache, scopedLists), or being built by another request's
// lists, lists nothing and takes no turn. So the lists a cache miss makes
// are gated, once per request, at its first list: the many clients that
// resume from one version after a restart share the one turn of the first.

// pastTurn is one request's turn to list past states, asked for at its
// first list and kept for the rest of the request's lists.
type pastTurn struct {
	m *Mux
	// ctx is the request's: the wait for the turn ends with it.
	ctx     context.Context
	version string

	once  sync.Once
	asked bool
	err   error
}

// pastRefused is a turn that did not come, as the lists' errors wrap it:
// turn says whose it was.
type pastRefused struct {
	turn *pastTurn
	err  error // the 429 the request answers
}

func (e *pastRefused) Error() string { return e.err.Error() }
func (e *pastRefused) Unwrap() error { return e.err }

// admit waits for the turn once; every later list of the request has it
// (or its refusal).
func (t *pastTurn) admit() error {
	t.once.Do(func() {
		t.asked = true
		if err := t.m.admitPast(t.ctx, t.version); err != nil {
			t.err = &pastRefused{turn: t, err: err}
		}
	})
	return t.err
}

// inTurn is c with each exact lister waiting for t first.
func (c pastConfig) inTurn(t *pastTurn) pastConfig {
	lists := make(map[string]ListFunc, len(c.lists))
	for k, f := range c.lists {
		if f == nil {
			lists[k] = nil
			continue
		}
		lists[k] = func(ctx context.Context, rv, namespace string) ([]runtime.Object, error) {
			if err := t.admit(); err != nil {
				return nil, err
			}
			return f(ctx, rv, namespace)
		}
	}
	c.lists = lists
	return c
}

// pastRetries bounds how many times a request builds again a past state
// whose build, shared with another request, failed for that request's
// refused turn.
const pastRetries = 3

// pastWait bounds a request's wait for the lists of a past state (its turn
// included), well within the request's timeout: they go on without it,
// shared with the requests after it, and it is answered 429 (a list or a
// watch again, after Retry-After), as kube-apiserver bounds its own waits.
const pastWait = 10 * time.Second

// errPastWait ends a wait for a past state's lists that took pastWait.
var errPastWait = errors.New("the sources' lists at that version took longer than " + pastWait.String())

// pastInTurn is pastFor with the lists of cache misses in the requester's
// turn, waited for pastWait at most (errPastWait). A *pastRefused error is
// this request's refusal: its err is the answer (429).
func (m *Mux) pastInTurn(ctx context.Context, c pastConfig, want rv.Version, resource, namespace, version string) (*pastState, error) {
	waitCtx, stop := m.bounded(ctx, pastWait, errPastWait)
	defer stop()
	for attempt := 0; ; attempt++ {
		turn := &pastTurn{m: m, ctx: ctx, version: version}
		p, err := m.pastFor(waitCtx, c.inTurn(turn), want, resource, namespace)
		var refused *pastRefused
		if errors.As(err, &refused) && refused.turn != turn && attempt < pastRetries && waitCtx.Err() == nil {
			// Another request's build this one waited for: its own turn
			// may come.
			continue
		}
		if errors.As(err, &refused) && refused.turn != turn {
			// Refused with the request it waited for, without a turn of
			// its own: a refusal all the same.
			pastStates.WithLabelValues("refused").Inc()
			err = &pastRefused{turn: turn, err: refused.err}
		}
		if err == nil && !turn.asked {
			pastStates.WithLabelValues("cached").Inc()
		}
		return p, err
	}
}

// admitPast waits for the requester's turn to list a past state
// (Options.PastStates): 429 when it does not come.
func (m *Mux) admitPast(ctx context.Context, version string) error {
	if m.opts.PastStates == nil {
		pastStates.WithLabelValues("admitted").Inc()
		return nil
	}
	if err := m.opts.PastStates(ctx); err != nil {
		pastStates.WithLabelValues("refused").Inc()
		return apierrors.NewTooManyRequests(fmt.Sprintf("resourceVersion %s needs the sources listed at a past version, and this requester's turn did not come (%v): try again", version, err), 1)
	}
	pastStates.WithLabelValues("admitted").Inc()
	return nil
}

// bounded returns ctx, ended with cause after d on the mux's clock; stop
// releases it.
func (m *Mux) bounded(ctx context.Context, d time.Duration, cause error) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	t := m.opts.Clock.NewTimer(d)
	done := make(chan struct{})
	go func() {
		select {
		case <-t.C():
			cancel(cause)
		case <-done:
		}
	}()
	return ctx, func() {
		close(done)
		t.Stop()
		cancel(nil)
	}
}
