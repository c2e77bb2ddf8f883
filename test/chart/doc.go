// Package chart tests the Helm chart charts/implicit-apiserver with the helm
// CLI (hack/build-tools.sh helm, from the Go module proxy): helm lint, and
// helm template's output checked object by object against what the server
// needs (its flags, its configuration file, artifacts/base's RBAC, security
// context and webhooks) and the cluster-level pitfalls of issue 14 (the
// APIService's group priority, the priority-class ResourceQuota, the
// NetworkPolicy that comes with anonymous webhooks).
//
// It imports of this module only internal/controlplane,
// pkg/admission/webhookconfig (the webhook paths) and pkg/cmd/server (the
// flags), and nothing else that serves.
package chart
