// Package apiserver wires implicit-apiserver together: Config ->
// CompletedConfig -> New, in the manner of k8s.io/sample-apiserver. It holds
// no etcd: New builds the source informers, a view per served kind and the
// REST storage of each view, with readiness tied to informer sync and OpenAPI
// schemas taken from the host cluster.
//
// The group implicit.dev/v1alpha1 is not installed once with
// InstallAPIGroup: kinds appear while the server runs (a CRD created after
// it started). A kindController (kinds.go) asks the host about every
// configured kind (discovery, OpenAPI v3, the CRD's printer columns; resolve.go)
// until it exists, feeds it to the watch multiplexer as a pending resource
// and serves its view once its informer has synced. The served group
// (group.go) installs the whole group version with k8s.io/apiserver's own
// installer into a new go-restful container whenever the served kinds
// change and swaps it in atomically, updating plain and aggregated discovery
// and the OpenAPI v2 and v3 documents alongside, as
// k8s.io/apiextensions-apiserver does for custom resources. Kinds served
// from unstructured objects are encoded as they are (codec.go).
package apiserver
