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
// It imports pkg/admission only, for the webhook configurations the guards serve
// (their rendering will move to a package of its own with ConditionSync) and
// must not import the server's wiring (pkg/apiserver, pkg/cmd/server); it
// writes nothing but standard output.
package main
