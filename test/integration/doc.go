// Package integration tests implicit-apiserver end to end: a real etcd and
// kube-apiserver (built from the Go module proxy by hack/build-tools.sh),
// kube-controller-manager for namespace deletion, and implicit-apiserver run
// as a process and registered behind the aggregation layer. Clients are
// client-go and kubectl, talking to kube-apiserver, never to
// implicit-apiserver directly.
//
// The control plane starts once per package (TestMain); tests run one after
// another, since every tenant view sees the global namespace.
//
// Beyond internal/controlplane and the test helpers, it imports the server's
// packages only for names and configuration it checks against
// (pkg/apis/implicit/v1alpha1, pkg/kinds, pkg/merge's problem names,
// pkg/admission's, pkg/admission/webhookconfig's and pkg/authz's webhook
// names and configurations, pkg/cmd/server's flags, pkg/sourcefeed's default
// progress interval), never to serve.
package integration
