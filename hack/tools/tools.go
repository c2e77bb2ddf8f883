//go:build tools

// Package tools pins the control-plane commands built by hack/build-tools.sh
// (kubelet: for make e2e's one-node cluster), and the code generators `make
// generate` runs (deepcopy-gen, openapi-gen), at the versions
// k8s.io/kubernetes pins.
package tools

import (
	_ "k8s.io/code-generator/cmd/deepcopy-gen"
	_ "k8s.io/kube-openapi/cmd/openapi-gen"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
