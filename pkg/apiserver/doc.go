// Package apiserver wires implicit-apiserver together: Config ->
// CompletedConfig (Complete fills in defaults) -> New, in the manner of
// k8s.io/sample-apiserver. New makes the watch multiplexer, the served group
// (pkg/servedgroup) with the question storages beside the views, the
// admission guards, the authorization webhook and the kind controller
// (pkg/kindcontroller), and ties readiness to the kinds being looked up and
// every source being read. It holds no etcd and, beyond probing the
// hub cluster's health and starting the materializer, no logic of its own.
package apiserver
