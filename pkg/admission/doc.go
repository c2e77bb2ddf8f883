// Package admission owns the guards' decisions: what each admission webhook
// implicit-apiserver serves to kube-apiserver answers, one guard per path.
// A guard decides a request from what it asks of the sources (Mirror: small
// interfaces, each declared by the guard that asks it, all answered by the
// what-if index of pkg/admission/whatif) and from SubjectAccessReviews of
// the requester, and changes nothing in the cluster. It builds on
// pkg/merge, pkg/admission/whatif, pkg/admission/webhookconfig (the
// webhooks' names and paths; their configurations and ConditionSync live
// there) and pkg/webhook (a review's transport); it must not import
// pkg/registry, pkg/apiserver or pkg/watchmux (the mirror is read through
// Mirror only). docs/design.md ("Guards") lists what each guard decides.
//
// Each guard, by what it protects (DESIGN.md, "Guards"), and the file that
// decides it:
//
//	locks         a locked source: changing, deleting, locking or        locks.go
//	              unlocking it needs unlock; a lock may not displace
//	              other locks, objects of a materialized kind, or an
//	              open candidate
//	shadows       a locked inherited item: no object below shadows it    shadows.go
//	parents       a namespace's place: a parent the requester may        hierarchy.go (the order of the checks)
//	              update, a tenant, no cycle, not going away; the        hierarchy_checks.go (each check)
//	              recorded parent uid; a tenancy or parent change        hierarchy_judge.go (judged both ways,
//	              that takes locked items needs unlock                     under the lock; admitted changes assumed)
//	exclusions    the implicit.dev/exclude annotation, judged with the   exclusions.go
//	              parents guard: no entry is a silent no-op
//	exceptions    a namespace's exceptions, judged with the parents      exceptions.go (the order; marks;
//	              guard: each annotation by its one kind of writer         exclusions needing exceptions)
//	              (requester, approver with approve on the source,       exception_specs.go (an exception)
//	              the server); no locked item, no end past a maximum     exception_approvals.go (an approval)
//	namespace-    what a namespace others inherit from takes with it     namespace_deletions.go
//	deletions     when it is deleted: unlock on each locked item lost
//	fanout        none: warns how many views a change reaches (on a     fanout.go
//	              hub, the members' too, by their reports: fleethub)
//	materialized  materialized copies: only the server writes them       materialized.go
//	candidates    candidates of a stable name: one each, immutable       candidates.go
//	              fields kept, unlock for a locked source's
//	stages        a namespace's implicit.dev/stage label: the stage verb stages.go
//	parent-uid    (mutating) records the parent's uid beside the label   parentuid.go
//	own-copy      (mutating) a copy someone else edits becomes theirs    owncopy.go
//
// DESIGN.md's invariants, and where they are held: (1) a locked item stays
// in every view without unlock: locks.go, hierarchy_judge.go (lockedLoss),
// namespace_deletions.go, candidates.go (candidateLocks); (3) the real
// object under a locked inherited name of a materialized kind is the
// view's item: hierarchy_checks.go (standIns), locks.go (lockOverObjects),
// stages.go (stagedStandIns), materialized.go and owncopy.go; (4) a refused
// request only makes later decisions stricter, for a bounded time:
// assumptions.go (the namespace changes admitted), recent.go (the locks,
// candidates and objects admitted), each judged both ways. Invariant (2),
// what inherited bindings grant, is pkg/authz's. Across replicas: shared.go,
// shared_memory.go and ledger_lease.go (one record the decisions take turns
// on).
//
// Shared by the guards: config.go (Config, NewGuards), mirror.go (Mirror,
// MirrorOf), guards.go (Guards, decisions, the request's source),
// handler.go (the HTTP handler, access reviews), turns.go (one parents
// decision per tenant at a time).
package admission
