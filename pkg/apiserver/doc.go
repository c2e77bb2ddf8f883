// Package apiserver wires implicit-apiserver together: Config ->
// CompletedConfig -> New, in the manner of k8s.io/sample-apiserver. It holds
// no etcd: New builds the source informers, a view per served kind, the REST
// storage of each view, and installs them as the API group implicit.dev/v1alpha1
// on a k8s.io/apiserver GenericAPIServer, with readiness tied to informer sync
// and OpenAPI schemas taken from the host cluster.
package apiserver
