// Package apiserver wires implicit-apiserver together: Config ->
// CompletedConfig (Complete fills in defaults) -> New, in the manner of
// k8s.io/sample-apiserver. New makes the watch multiplexer fed by
// pkg/sourcefeed's tracked informers, the served group (pkg/servedgroup)
// with the question storages beside the views, the admission guards, the
// authorization webhook, the materializer (pkg/materialize) and the kind
// controller (pkg/kindcontroller), starts them with the server and ties
// readiness to the kinds being looked up and every source being read. It
// holds no etcd and no logic of its own: what is not wiring belongs to the
// package that owns the concept.
//
// It is the top of the import graph: only pkg/cmd/server imports it, and
// no package it wires may import it.
package apiserver
