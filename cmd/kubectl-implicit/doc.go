// Command kubectl-implicit is the kubectl plugin of implicit-apiserver:
// `kubectl implicit tree|why|reach|diff|rollout`, answered by the server's
// hierarchies, explanations and previews (implicit.dev/v1alpha1) and its
// views; rollout also follows, promotes and aborts a source's candidate.
// Put it on PATH, or install it with krew (hack/krew).
//
// The plugin is a client: it reads and writes through kube-apiserver with
// k8s.io/cli-runtime, and imports of this module only
// pkg/apis/implicit/v1alpha1 (the API types and the implicit.dev label and
// annotation names), pkg/merge's ParseCandidate (a candidate's annotations,
// parsed as the server parses them) and pkg/version. It must not import
// anything that serves: pkg/apiserver, pkg/registry, pkg/watchmux,
// pkg/views, pkg/admission, pkg/authz.
package main
