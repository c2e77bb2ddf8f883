//go:build tools

// Package tools pins the control-plane commands built by hack/build-tools.sh
// (kubelet: for make e2e's one-node cluster).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
