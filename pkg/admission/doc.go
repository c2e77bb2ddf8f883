// Package admission owns the guards of implicit changes: the admission
// webhooks implicit-apiserver serves to kube-apiserver, one path and webhook
// per guard. Each decides a request from the watch multiplexer's mirror
// (Index) and SubjectAccessReviews of the requester, and changes nothing;
// ConditionSync keeps the webhooks' match conditions current. It builds on
// pkg/merge and pkg/watchmux and must not import pkg/registry or
// pkg/apiserver. docs/design.md ("Guards") lists what each guard decides.
//
// Each guard, by what it protects, and the file that decides it:
//
//	locks.implicit.dev                locks.go                a locked source: changing or deleting it needs unlock
//	shadows.implicit.dev              shadows.go              a locked inherited item: no object below may shadow it
//	parents.implicit.dev              hierarchy.go            a namespace's place in the hierarchy (parent, tenancy),
//	                                  hierarchy_checks.go     with what it would take from the views
//	                                  hierarchy_judge.go      (judged under the lock against the what-if index),
//	                                  exclusions.go           and its implicit.dev/exclude annotation
//	namespace-deletions.implicit.dev  namespace_deletions.go  what a namespace others inherit from passes down,
//	                                                          when it is deleted
//	fanout.implicit.dev               fanout.go               none: warns how many views a change reaches
//	materialized.implicit.dev         materialized.go         materialized copies: only the server writes them
//	candidates.implicit.dev           candidates.go           candidates of a stable name: who may stage them where
//	stages.implicit.dev               stages.go               a namespace's implicit.dev/stage label
//	parent-uid.implicit.dev           parentuid.go            (mutating) records the parent's uid beside the label
//	own-copy.implicit.dev             owncopy.go              (mutating) a copy someone else edits becomes their own source
//
// Shared by the guards: config.go (Config, NewGuards), guards.go (Guards,
// decisions, the request's source), handler.go (paths, the HTTP handler,
// access reviews), turns.go (one parents decision per tenant at a time),
// shared.go, shared_memory.go and ledger_lease.go (replicas take turns on
// one record).
//
// What the guards read: index.go (Index, the questions they ask of
// whatif.Index, the what-if index of package whatif: the mirror as it is and
// with admitted changes assumed); what they remember of their own
// admissions: assumptions.go (namespace changes), recent.go (locks and
// candidates).
//
// The webhook configurations: webhooks.go (rules, failure policies),
// match_conditions.go (CEL match conditions), conditionsync.go (keeps the
// conditions equal to the sources).
package admission
