// Package materialize writes the views of kinds configured with
// `delivery: Materialize` as real objects: in every tenant namespace it keeps
// the labelled copies of the source kind equal to the namespace's inherited
// items, for engines that read only real objects. It owns the copies and
// nothing else, works from the views' state, and writes from one replica,
// elected with a Lease. docs/design.md ("Materialized copies") has the rules.
//
// It builds on pkg/watchmux, pkg/views and pkg/kinds, and must not import
// pkg/admission or pkg/apiserver: the wiring hands the guards the server's
// own identity (Server.OnIdentity).
package materialize
