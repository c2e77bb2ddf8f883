// Package fleet is a member cluster's side of its hub's fleet
// (fleet.implicit.dev/v1alpha1, docs/fleets.md): the MemberCluster the hub's
// admin registered for it, and the report the member keeps in its status.
//
//   - Registration watches the member's own MemberCluster on the hub (a
//     list and watch with the field selector metadata.name=<member>, so the
//     hub's RBAC can limit the member to it by resourceNames) and says
//     whether the member is registered and with which labels: what a hub
//     candidate's implicit.dev/canary-clusters selects on.
//   - Reporter writes the member's report into that MemberCluster's status
//     subresource (a merge patch on /status; it never creates: only the
//     hub's admin registers a member), every interval and soon after the
//     hub's sources change, at most once per MinReportGap: the hub revision
//     the member serves, since when it is stale, and per hub source and
//     candidate how many of its namespaces hold it (counts only, from
//     watchmux.Mux.GlobalReach).
//
// Both run until their context ends, on an injected clock.
package fleet
