// Package materialize makes the views of kinds configured with
// `delivery: Materialize` real: for every tenant namespace it keeps the
// namespace's real objects of the source kind that carry the label
// implicit.dev/materialized: "true" (its copies) equal to the inherited
// items of that namespace's view, for engines that read only real objects
// (CNI plugins enforcing NetworkPolicies, policy engines reading their own
// namespaced kinds).
//
// It owns the copies and nothing else:
//
//   - an inherited item (scope parent or global) becomes a copy of the same
//     name, with the view item's labels and provenance annotations and the
//     materialized label: created with Create, then kept with server-side
//     apply (field manager implicit-apiserver, force) under a
//     resourceVersion precondition; local items are the tenant's own and
//     never touched;
//   - a copy whose item left the view is deleted, under uid and
//     resourceVersion preconditions;
//   - a tenant object holding an inherited name is never overwritten, even
//     one created between the materializer's read and its write (the Create
//     fails with AlreadyExists): it is reported (an Event on the object, a
//     log line and implicit_materialize_conflicts_total); a copy a write
//     made its writer's own (the label removed at admission) is no copy any
//     more, and the preconditions keep every write off it;
//   - a copy changed or deleted behind the guards (drift) is overwritten or
//     recreated and counted in implicit_materialize_drift_repaired_total.
//
// It builds on the watch multiplexer (pkg/watchmux) and the view items of
// pkg/views: it works from the views' state, never from a log of its own.
// A watch of each materialized view on all namespaces says which
// namespace changed; the namespace is queued (a rate-limited workqueue
// keyed by namespace, so a busy namespace never starves another) and its
// view is compared with its copies, read from an informer of the labelled
// objects. After a restart, a leader change or an outage it converges by
// comparing every namespace again. It acts only while the multiplexer
// serves the kind (synced): a copy is never deleted because a source could
// not be read (fail-static, as views are).
//
// Only one replica writes: Run campaigns for a Lease with client-go's
// leader election. Writes go through a client limited to --materialize-qps
// and --materialize-burst; the lag from a namespace's change to its last
// copy written is the histogram implicit_materialize_lag_seconds, the
// namespaces behind are the gauge implicit_materialize_pending_namespaces
// and a periodic log line names them.
package materialize
