package server

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// clusterWideReads answers a user's reads (get, list, watch) of one
// namespace from one cluster-wide decision once the user reads a second
// namespace: "may this user list rolebindings.implicit.dev in all
// namespaces?" allows every namespace (namespace "" in a
// SubjectAccessReview means all of them), so a controller or a client
// with a ClusterRoleBinding that opens the views of 10,000 namespaces costs
// one delegated SubjectAccessReview instead of 10,000 (the delegating
// authorizer caches by namespace, and misses on every new one).
//
// A user seen in a single namespace is authorized as before, per
// namespace, with no extra review: a tenant reading its own namespace
// never pays for the cluster-wide question. A user denied cluster-wide
// (or an error) is authorized per namespace until the decision expires.
// Only allows are answered here; the namespaced decision is never turned
// into a deny. kube-apiserver has authorized the request itself, with its
// namespace, before proxying it here.
type clusterWideReads struct {
	inner         authorizer.Authorizer
	allowTTL      time.Duration
	denyTTL       time.Duration
	now           func() time.Time
	mu            sync.Mutex
	users         *lru.Cache[string, *clusterWideEntry]
	clusterChecks int // cluster-wide reviews asked, for tests
}

// clusterWideEntry is what is known of one user's reads of one resource.
type clusterWideEntry struct {
	namespace    string // the first namespace read, until seenUntil
	seenUntil    time.Time
	allowedUntil time.Time
	deniedUntil  time.Time
	// pending is closed when the cluster-wide review in flight is
	// answered (nil: none in flight). A reconnect storm's requests of
	// many namespaces arrive together: they wait for the one review
	// instead of each sending its own (the delegating authorizer's
	// cache does not merge concurrent misses, and its client sends at
	// most 200 reviews a second).
	pending chan struct{}
}

// clusterWideUsers bounds the users (and resources and verbs) remembered.
const clusterWideUsers = 4096

// newClusterWideReads wraps inner. allowTTL and denyTTL are how long a
// cluster-wide allow or deny is reused (the delegating authorizer's cache
// TTLs, --authorization-webhook-cache-authorized-ttl and -unauthorized-ttl);
// allowTTL <= 0 turns the shortcut off. A deny only stops the shortcut
// being tried, so it is kept at least as long as an allow.
func newClusterWideReads(inner authorizer.Authorizer, allowTTL, denyTTL time.Duration) *clusterWideReads {
	denyTTL = max(denyTTL, allowTTL)
	users, err := lru.New[string, *clusterWideEntry](clusterWideUsers)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return &clusterWideReads{inner: inner, allowTTL: allowTTL, denyTTL: denyTTL, now: time.Now, users: users}
}

// Authorize implements authorizer.Authorizer.
func (c *clusterWideReads) Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	if c.allowed(ctx, a) {
		return authorizer.DecisionAllow, "", nil
	}
	return c.inner.Authorize(ctx, a)
}

// ConditionsAwareAuthorize implements authorizer.Authorizer: the inner
// authorizer's decision unless a cluster-wide allow answers.
func (c *clusterWideReads) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	if c.allowed(ctx, a) {
		return authorizer.ConditionsAwareDecisionFromParts(authorizer.DecisionAllow, "", nil)
	}
	return c.inner.ConditionsAwareAuthorize(ctx, a)
}

// EvaluateConditions implements authorizer.Authorizer.
func (c *clusterWideReads) EvaluateConditions(ctx context.Context, d authorizer.ConditionsAwareDecision, data authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return c.inner.EvaluateConditions(ctx, d, data)
}

// allowed is whether a's user may do a's read in every namespace, as far
// as a cached cluster-wide decision says or, for a user seen reading a
// second namespace, a new one does. false: ask the inner authorizer.
func (c *clusterWideReads) allowed(ctx context.Context, a authorizer.Attributes) bool {
	if !a.IsResourceRequest() || a.GetNamespace() == "" || !readVerb(a.GetVerb()) || a.GetUser() == nil || c.allowTTL <= 0 {
		return false
	}
	key := clusterWideKey(a)
	c.mu.Lock()
	e, ok := c.users.Get(key)
	if !ok {
		e = &clusterWideEntry{}
		c.users.Add(key, e)
	}
	for {
		now := c.now()
		switch {
		case now.Before(e.allowedUntil):
			c.mu.Unlock()
			return true
		case now.Before(e.deniedUntil):
			c.mu.Unlock()
			return false
		case e.pending != nil:
			// Another request of this user asks the cluster-wide
			// question: its answer is this one's.
			pending := e.pending
			c.mu.Unlock()
			select {
			case <-pending:
			case <-ctx.Done():
				return false
			}
			c.mu.Lock()
			continue
		case e.namespace == "" || e.namespace == a.GetNamespace() || !now.Before(e.seenUntil):
			e.namespace, e.seenUntil = a.GetNamespace(), now.Add(c.allowTTL)
			c.mu.Unlock()
			return false
		}
		break
	}
	c.clusterChecks++
	pending := make(chan struct{})
	e.pending = pending
	c.mu.Unlock()

	d, _, err := c.inner.Authorize(ctx, clusterWide{a})
	allow := err == nil && d == authorizer.DecisionAllow
	c.mu.Lock()
	// From the answer: the TTLs count from when it is known.
	if now := c.now(); allow {
		e.allowedUntil = now.Add(c.allowTTL)
	} else {
		e.deniedUntil = now.Add(c.denyTTL)
	}
	e.pending = nil
	close(pending)
	c.mu.Unlock()
	return allow
}

func readVerb(verb string) bool { return verb == "get" || verb == "list" || verb == "watch" }

// clusterWideKey identifies the user (name, UID, groups, extra) and what
// is read (verb, API group, resource, subresource; a get also by name).
func clusterWideKey(a authorizer.Attributes) string {
	u := a.GetUser()
	var b strings.Builder
	for _, s := range []string{u.GetName(), u.GetUID(), a.GetVerb(), a.GetAPIGroup(), a.GetResource(), a.GetSubresource(), a.GetName()} {
		b.WriteString(s)
		b.WriteByte(0)
	}
	groups := slices.Clone(u.GetGroups())
	slices.Sort(groups)
	for _, g := range groups {
		b.WriteString(g)
		b.WriteByte(1)
	}
	extra := u.GetExtra()
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(2)
		for _, v := range extra[k] {
			b.WriteString(v)
			b.WriteByte(3)
		}
	}
	return b.String()
}

// clusterWide is a's request in every namespace.
type clusterWide struct{ authorizer.Attributes }

func (clusterWide) GetNamespace() string { return "" }
