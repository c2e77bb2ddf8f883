//go:build tools

// Package tools pins k8s.io/sample-apiserver, the etcd-backed aggregated
// server that test/bench measures as the aggregated-path reference
// (hack/build-tools.sh sample-apiserver). It is a module of its own so that
// its dependencies never enter the product's go.mod or hack/tools'.
//
// It is imported by nothing and imports nothing of this module.
package tools
