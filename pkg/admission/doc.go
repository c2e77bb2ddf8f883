// Package admission owns the guards of implicit changes, the admission
// webhooks implicit-apiserver serves to kube-apiserver. It decides each
// guarded request from the watch multiplexer's mirror and SubjectAccessReviews
// of the requester, and changes nothing. It keeps the webhooks' match
// conditions current, so that only the requests a guard may act on reach it.
//
// The guards:
//
//   - locks: changing, deleting, locking or unlocking a locked source
//     (annotation implicit.dev/locked: "true") needs the custom verb unlock on
//     that object, checked with a SubjectAccessReview for the requester;
//   - shadows: creating an object that would shadow a locked inherited item
//     is denied, naming the lock;
//   - parents: setting implicit.dev/parent on a namespace needs update on the
//     new parent, and may not close a cycle;
//   - fanout: every update or delete of an inherited source is allowed with a
//     warning of how many namespaces' views it changes;
//   - candidates: a staged version of a source (implicit.dev/candidate-for)
//     must be well formed, the only one for its stable source, keep the
//     source's immutable fields, and needs unlock on a locked stable source;
//     it is allowed with a warning of how many namespaces it reaches;
//   - stages: setting a namespace's implicit.dev/stage needs the custom verb
//     stage on it.
//
// Each guard has its own path and webhook, so that its failure policy and
// match conditions fit it (webhooks.go). The match conditions send only the
// requests a guard may act on; those that depend on the sources (the names
// of locked items, the namespaces others inherit from) are kept current by
// ConditionSync. Decisions read the watch multiplexer's mirror through the
// Index, whose MuxIndex answers each question inside one Mux.Read
// (index.go), and never change anything.
package admission
