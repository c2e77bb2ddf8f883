package accessreview

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/utils/clock"
)

// Authorizer asks the host cluster whether user may do attrs (pkg/admission's
// Authorizer; its SARAuthorizer asks with SubjectAccessReviews).
type Authorizer interface {
	Allowed(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, string, error)
}

// Defaults of Options.
const (
	DefaultQPS          = 100
	DefaultBurst        = 200
	DefaultPerAdmission = 32
	DefaultCacheTTL     = 3 * time.Second
	DefaultCacheSize    = 10000
	DefaultMaxWaiting   = 64
)

// Options tune a Reviewer; zero values take the defaults.
type Options struct {
	// QPS and Burst are the rate of questions the host is asked, shared
	// fairly between tenants (see fairQueue). The client that asks should
	// have no rate limit of its own.
	QPS   float64
	Burst int
	// PerAdmission caps the questions one admission review may ask.
	PerAdmission int
	// CacheTTL is how long an answer is reused; CacheSize bounds how many
	// are kept.
	CacheTTL  time.Duration
	CacheSize int
	// MaxWaiting bounds one tenant's questions waiting for their turn.
	MaxWaiting int
	// Clock times the cache and the rate (default the real clock).
	Clock clock.WithDelayedExecution
}

// Reviewer answers the guards' access questions: from its cache when the
// same user asked the same question a moment ago, else from the host
// cluster, each tenant in its turn (fairQueue). Questions asked on behalf
// of one admission review (a context from Budget) are counted and capped.
type Reviewer struct {
	host         Authorizer
	perAdmission int
	cache        *decisions
	queue        *fairQueue
}

// New returns a Reviewer asking host.
func New(host Authorizer, o Options) *Reviewer {
	if o.QPS <= 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst < 1 {
		o.Burst = DefaultBurst
	}
	if o.PerAdmission < 1 {
		o.PerAdmission = DefaultPerAdmission
	}
	if o.CacheTTL <= 0 {
		o.CacheTTL = DefaultCacheTTL
	}
	if o.CacheSize < 1 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MaxWaiting < 1 {
		o.MaxWaiting = DefaultMaxWaiting
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Reviewer{
		host:         host,
		perAdmission: o.PerAdmission,
		cache:        newDecisions(o.Clock, o.CacheTTL, o.CacheSize),
		queue:        newFairQueue(o.Clock, o.QPS, o.Burst, o.MaxWaiting),
	}
}

// ErrTooManyReviews is returned once an admission review has asked as many
// questions as it may.
var ErrTooManyReviews = errors.New("too many access reviews for one request")

type budgetKey struct{}

// budget counts the questions of one admission review.
type budget struct {
	asked atomic.Int32
	limit int32
}

// Budget returns ctx carrying a fresh count of questions for one admission
// review: Allowed refuses the questions past the Reviewer's cap.
func (r *Reviewer) Budget(ctx context.Context) context.Context {
	return context.WithValue(ctx, budgetKey{}, &budget{limit: int32(r.perAdmission)})
}

// Allowed implements Authorizer. Every question counts against the
// admission review's budget, cached or not, so that a decision does not
// depend on what the cache holds.
func (r *Reviewer) Allowed(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	if b, ok := ctx.Value(budgetKey{}).(*budget); ok {
		if n := b.asked.Add(1); n > b.limit {
			return false, "", fmt.Errorf("%w: this request needs more than %d permission checks", ErrTooManyReviews, b.limit)
		}
	}
	key, err := cacheKey(user, attrs)
	if err != nil {
		return false, "", err
	}
	if a, ok := r.cache.get(key); ok {
		return a.allowed, a.reason, nil
	}
	if err := r.queue.wait(ctx, user); err != nil {
		return false, "", err
	}
	allowed, reason, err := r.host.Allowed(ctx, user, attrs)
	if err != nil {
		return false, "", err
	}
	// Only allows are kept: a grant a user was just given (kubectl auth
	// can-i already says yes) must count at once, so a denial is asked
	// again every time. A flood of refused requests is bounded by the
	// fair queue and the budget per review, not by the cache.
	if allowed {
		r.cache.put(key, answer{allowed: allowed, reason: reason})
	}
	return allowed, reason, nil
}
