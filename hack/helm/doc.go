//go:build tools

// Package tools pins the Helm CLI that hack/build-tools.sh builds (its helm
// target) for the chart tests and `make release`. It is a module of its own
// so that Helm's dependencies never enter the product's go.mod or hack/tools'.
//
// It is imported by nothing and imports nothing of this module.
package tools
