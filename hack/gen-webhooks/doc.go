// Command gen-webhooks prints the guards' webhook configurations of
// artifacts/base for the default kinds, calling the in-cluster Service, with
// cert-manager injecting the CA: the ValidatingWebhookConfiguration, or with
// -mutating the MutatingWebhookConfiguration of the parent-uid and own-copy
// webhooks.
//
//	go run ./hack/gen-webhooks > artifacts/base/validatingwebhookconfiguration.yaml
//	go run ./hack/gen-webhooks -mutating > artifacts/base/mutatingwebhookconfiguration.yaml
//
// TestWebhookArtifact and TestMutatingWebhookArtifact (test/integration)
// fail when the files and the code differ.
//
// It imports pkg/admission/webhookconfig only, where the guards' webhook
// configurations are rendered, and must not import the guards or the
// server's wiring (pkg/admission, pkg/apiserver, pkg/cmd/server); it writes
// nothing but standard output.
package main
