package v1alpha1

// The labels and annotations of DESIGN.md. Labels and annotations under the
// implicit.dev/ prefix that describe provenance are written by the server
// only: a source object that carries one has it replaced or removed in its
// view (see pkg/merge's ProvenanceKeys), so no source can spoof where it came
// from. They are said here, in the API package, so that clients (the kubectl
// plugin) and the serving packages read them without importing pkg/merge.
const (
	// Prefix is the prefix of every implicit.dev label and annotation.
	Prefix = "implicit.dev/"

	// LabelParent on a namespace names its parent namespace.
	LabelParent = "implicit.dev/parent"
	// AnnotationParentUID on a namespace records the uid of the parent its
	// LabelParent meant when the label was admitted (the mutating webhook
	// writes it): only a parent of that uid is inherited.
	AnnotationParentUID = "implicit.dev/parent-uid"
	// LabelInherit "false" on a namespace makes it a non-tenant.
	LabelInherit = "implicit.dev/inherit"
	// AnnotationExclude on a namespace lists inherited items removed from its
	// view and its descendants' views: "rolebindings/ci-bot,networkpolicies/*".
	AnnotationExclude = "implicit.dev/exclude"
	// AnnotationExceptions on a namespace lists its exceptions: a JSON list
	// of ExceptionSpec, each excluding inherited items like AnnotationExclude
	// does, with a name, a reason, its requester and an end. Written by the
	// requester (requestedBy must name them).
	AnnotationExceptions = "implicit.dev/exceptions"
	// AnnotationExceptionApprovals on a namespace: a JSON object of
	// ExceptionApproval by exception name. Written by approvers only (the
	// RBAC verb "approve" on the sources an approval covers).
	AnnotationExceptionApprovals = "implicit.dev/exception-approvals"
	// AnnotationExceptionsExpired on a namespace: a JSON object of exception
	// name to the digest of the version that expired. Written by the server
	// only, at each exception's end: from that revision on the exception is
	// in effect nowhere (the clock never ends one by itself, so every
	// component switches at one revision).
	AnnotationExceptionsExpired = "implicit.dev/exceptions-expired"
	// AnnotationExceptionApproval "required" on a source object: its items
	// are excepted only by an approved exception (never by
	// AnnotationExclude, nor by an exception not approved for the source's
	// namespace).
	AnnotationExceptionApproval = "implicit.dev/exception-approval"
	// AnnotationExceptionMaxDuration on a source object ("720h"): its items
	// are excepted only by an exception with an end, at most that long after
	// the exception is written.
	AnnotationExceptionMaxDuration = "implicit.dev/exception-max-duration"
	// AnnotationLocked "true" on a source object locks it.
	AnnotationLocked = "implicit.dev/locked"
	// AnnotationMerge "overlay" on a source object asks for the Overlay strategy.
	AnnotationMerge = "implicit.dev/merge"
	// AnnotationCandidateFor on a source object makes it a candidate: a
	// staged version of the source of that name in its own namespace (or,
	// when there is none, a staged creation of it). See pkg/merge/candidate.go.
	AnnotationCandidateFor = "implicit.dev/candidate-for"
	// AnnotationCanarySelector on a candidate: a label selector over the
	// namespace label LabelStage only, naming the namespaces that see the
	// candidate instead of the stable source ("implicit.dev/stage=canary").
	AnnotationCanarySelector = "implicit.dev/canary-selector"
	// AnnotationCanaryClusters on a hub candidate: a label selector over
	// the labels the hub's admin registered for each member cluster
	// (MemberCluster, fleet.implicit.dev), naming the members the candidate
	// is a candidate in. In any other member, and on a server that is no
	// member of a fleet, the candidate does not exist: it reaches no
	// namespace and is not audited. Absent: every member.
	AnnotationCanaryClusters = "implicit.dev/canary-clusters"
	// LabelStage on a namespace: the rollout stage it belongs to, which
	// canary selectors match. Setting it needs the RBAC verb "stage".
	LabelStage = "implicit.dev/stage"
	// LabelMaterialized "true" marks a real object the server wrote as the
	// copy of an inherited view item (delivery: Materialize). Copies are
	// never sources: the multiplexer ignores objects that carry it, and
	// only the server's own identity may set it (anyone else's write to a
	// copy removes it at admission: the object becomes its writer's own).
	LabelMaterialized = "implicit.dev/materialized"

	// LabelScope on a view item: local, parent or global.
	LabelScope = "implicit.dev/scope"
	// LabelSourceNamespace on a view item: the namespace of the winning source.
	LabelSourceNamespace = "implicit.dev/source-namespace"
	// AnnotationSourceUID on a view item: the winning source's uid.
	AnnotationSourceUID = "implicit.dev/source-uid"
	// AnnotationSourceResourceVersion on a view item: the source's resourceVersion.
	AnnotationSourceResourceVersion = "implicit.dev/source-resource-version"
	// AnnotationSourceCluster on a view item: the hub cluster of a global source.
	AnnotationSourceCluster = "implicit.dev/source-cluster"
	// AnnotationSourceStaleSince on a view item from a hub: the hub has been
	// unreachable since then, and the item is the last one read from it.
	AnnotationSourceStaleSince = "implicit.dev/source-stale-since"
	// AnnotationOverlays on a view item: the sources merged on top, in order.
	AnnotationOverlays = "implicit.dev/overlays"
	// AnnotationConflict on a view item: what a lock blocked.
	AnnotationConflict = "implicit.dev/conflict"
	// AnnotationCandidate on a view item: the candidate it was built from
	// (pkg/merge's Result.Candidates), when the viewing namespace's stage is selected.
	AnnotationCandidate = "implicit.dev/candidate"
)

// ProvenanceLabels are the labels the server sets on view items.
var ProvenanceLabels = []string{LabelScope, LabelSourceNamespace}

// ProvenanceAnnotations are the annotations the server sets on view items.
var ProvenanceAnnotations = []string{
	AnnotationSourceUID, AnnotationSourceResourceVersion, AnnotationSourceCluster,
	AnnotationSourceStaleSince, AnnotationOverlays, AnnotationConflict, AnnotationCandidate,
}

// IsMaterialized reports whether labels mark a materialized copy.
func IsMaterialized(labels map[string]string) bool {
	return labels[LabelMaterialized] == "true"
}
