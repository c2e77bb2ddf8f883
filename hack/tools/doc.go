//go:build tools

// Package tools pins the control-plane commands built by hack/build-tools.sh
// (kubelet: for make e2e's one-node cluster), and the code generators `make
// generate` runs (deepcopy-gen, openapi-gen), at the versions
// k8s.io/kubernetes pins.
//
// It is imported by nothing and imports nothing of this module's packages.
package tools
