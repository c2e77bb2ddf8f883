package webhookconfig

// The webhooks of the ValidatingWebhookConfiguration, one per guard, and of
// the MutatingWebhookConfiguration.
const (
	WebhookLocks   = "locks.implicit.dev"
	WebhookShadows = "shadows.implicit.dev"
	WebhookParents = "parents.implicit.dev"
	WebhookFanout  = "fanout.implicit.dev"
	// WebhookMaterialized guards materialized copies and their label.
	WebhookMaterialized = "materialized.implicit.dev"
	// WebhookCandidates guards candidates, WebhookStages the namespaces'
	// implicit.dev/stage label.
	WebhookCandidates = "candidates.implicit.dev"
	WebhookStages     = "stages.implicit.dev"
	// WebhookNamespaceDeletions guards deleting a namespace others inherit
	// from; its match condition names those namespaces (ConditionSync).
	WebhookNamespaceDeletions = "namespace-deletions.implicit.dev"
	// WebhookParentUID and WebhookOwnCopy are the webhooks of the
	// MutatingWebhookConfiguration.
	WebhookParentUID = "parent-uid.implicit.dev"
	WebhookOwnCopy   = "own-copy.implicit.dev"
)

// The guards' paths on implicit-apiserver's secure port, each the path of
// the webhook of the same name (admission.Guards.Handler serves them).
const (
	PathLocks   = "/admission/locks"
	PathShadows = "/admission/shadows"
	PathParents = "/admission/parents"
	PathFanout  = "/admission/fanout"
	// PathMaterialized guards materialized copies.
	PathMaterialized = "/admission/materialized"
	// PathCandidates guards candidates, PathStages the namespaces' stage
	// label.
	PathCandidates = "/admission/candidates"
	PathStages     = "/admission/stages"
	// PathNamespaceDeletions guards deleting a namespace others inherit
	// from.
	PathNamespaceDeletions = "/admission/namespace-deletions"
	// PathParentUID and PathOwnCopy are the mutating guards'.
	PathParentUID = "/admission/parent-uid"
	PathOwnCopy   = "/admission/own-copy"
)

// Paths are every guard's path, for the authorization always-allow list:
// kube-apiserver calls webhooks without credentials.
var Paths = []string{PathLocks, PathShadows, PathParents, PathFanout, PathMaterialized, PathCandidates, PathStages, PathNamespaceDeletions, PathParentUID, PathOwnCopy}

// Subresources through which a guarded source changes: status (which the
// view shows) and scale (which writes spec.replicas).
const (
	SubresourceStatus = "status"
	SubresourceScale  = "scale"
)

// GuardedSubresources are the subresources the lock webhook sends UPDATEs
// of.
var GuardedSubresources = []string{SubresourceStatus, SubresourceScale}
