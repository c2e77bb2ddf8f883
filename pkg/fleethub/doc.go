// Package fleethub is the hub's side of a fleet (issue 44): a hub's
// implicit-apiserver (--fleet-hub) reads its members' MemberCluster reports
// (pkg/apis/fleet/v1alpha1) with an informer and keeps, per hub source, the
// sum of the namespaces the members say inherit it, so that the fan-out
// guard counts the fleet in O(log members) per request.
//
// It also exports what the hub knows of each member as metrics
// (implicit_fleet_member_last_report_timestamp_seconds, _stale,
// _sources_behind), the last against the hub's current sources, read
// through a small interface (HubSources) the wiring answers from the mirror.
//
// It imports pkg/apis only of this module: pkg/admission declares what it
// asks (admission.FleetIndex) and pkg/apiserver wires the two.
package fleethub
