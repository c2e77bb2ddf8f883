// Package webhookconfig owns how kube-apiserver reaches the admission guards:
// the webhooks' names and paths (names.go), the Validating and Mutating
// WebhookConfigurations with their rules and failure policies
// (configuration.go, which hack/gen-webhooks renders into artifacts/base),
// the CEL match conditions that send a guard only the requests it may act on
// (conditions.go), and ConditionSync, the controller that keeps the
// conditions and rules that depend on the sources current (conditionsync.go).
//
// It describes the guards and never decides: it must not import
// pkg/admission (whose handler serves at the paths named here) nor
// pkg/admission/whatif (whose index answers ConditionSync's Guarded).
package webhookconfig
