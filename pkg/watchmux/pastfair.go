package watchmux

import (
	"context"
	"errors"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/utils/clock"

	"github.com/implicit-dev/implicit-apiserver/pkg/accessreview"
)

// Fair turns for past states: a watch or list from a version this replica
// has no history for, whose state is not the current one, lists the
// sources at that version from kube-apiserver, unless the mux's caches of
// past states and lists hold them. Only those lists (a cache miss's:
// Options.PastStates, pastturn.go) share pastStateQPS fairly between requesters, by tenant and
// user (accessreview's fair queue), so that a tenant making up versions
// can't load kube-apiserver and etcd at will; one whose turn does not come
// within pastStateWait, or with pastStateMaxWaiting of its tenant's
// waiting already, is answered 429 and retries. Resumes from the current
// state, catch-ups and cached past states never wait (issue 38, case 8).
const (
	pastStateQPS        = 5
	pastStateBurst      = 20
	pastStateMaxWaiting = 20
	pastStateWait       = 3 * time.Second
)

// errPastStateWait ends a wait for a turn that took pastStateWait.
var errPastStateWait = errors.New("no turn to list a past state within " + pastStateWait.String())

// FairPastStates is the server's Options.PastStates: the requester's turn
// in a fair queue driven by c.
func FairPastStates(c clock.WithDelayedExecution) func(ctx context.Context) error {
	q := accessreview.NewFairQueue(c, pastStateQPS, pastStateBurst, pastStateMaxWaiting)
	return func(ctx context.Context) error {
		u, ok := request.UserFrom(ctx)
		if !ok {
			return nil // the server's own reads
		}
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		timer := c.AfterFunc(pastStateWait, func() { cancel(errPastStateWait) })
		defer timer.Stop()
		err := q.Wait(ctx, authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()})
		if err != nil && errors.Is(context.Cause(ctx), errPastStateWait) {
			return errPastStateWait
		}
		return err
	}
}
