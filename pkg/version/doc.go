// Package version holds implicit-apiserver's own version, stamped at build
// time, and publishes it as the implicit_build_info metric.
//
// The version is the project's (`git describe --tags --always --dirty`, set
// with the linker's -X flag by `make build`), not the version of the
// k8s.io libraries the server is built on: those are in kube-apiserver's
// kubernetes_build_info metric and the /version endpoint.
//
// It imports nothing of this module, so that the server and the kubectl
// plugin both use it.
package version
