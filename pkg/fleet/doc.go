// Package fleet is a member cluster's side of its hub's fleet
// (fleet.implicit.dev/v1alpha1, docs/fleets.md): the MemberCluster the hub's
// admin registered for it, and the report the member keeps in its status.
// The registration itself (its labels, what a hub candidate's
// implicit.dev/canary-clusters selects on) is read by the watch multiplexer
// as a source (watchmux.Mux.AddMembership, wired in pkg/apiserver).
//
//   - Reporter writes the member's report into that MemberCluster's status
//     subresource (a merge patch on /status; it never creates: only the
//     hub's admin registers a member), every interval and soon after the
//     hub's sources change, at most once per MinReportGap: the hub revision
//     the member serves, since when it is stale, and per hub source and
//     candidate how many of its namespaces hold it (counts only, from
//     watchmux.Mux.GlobalReach).
//
// It runs until its context ends, on an injected clock.
package fleet
