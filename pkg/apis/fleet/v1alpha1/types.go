package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group, Version, Kind and Resource of a member's report on the hub.
const (
	Group    = "fleet.implicit.dev"
	Version  = "v1alpha1"
	Kind     = "MemberCluster"
	Resource = "memberclusters"
)

// GroupVersionResource is memberclusters.fleet.implicit.dev/v1alpha1.
var GroupVersionResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// GroupVersionKind is MemberCluster's.
var GroupVersionKind = schema.GroupVersionKind{Group: Group, Version: Version, Kind: Kind}

// MemberCluster is one member cluster as its hub knows it: registered by
// the hub's admin (the name is the member's --fleet-member-name, the labels
// are what a hub candidate's implicit.dev/canary-clusters selects on), and
// reported on by the member's implicit-apiserver (Status). Cluster-scoped.
type MemberCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MemberClusterSpec   `json:"spec,omitempty"`
	Status MemberClusterStatus `json:"status,omitempty"`
}

// MemberClusterSpec is the hub admin's: nothing yet beyond the labels.
type MemberClusterSpec struct{}

// MemberClusterStatus is the member's report: counts only, never a
// namespace's or a user's name.
type MemberClusterStatus struct {
	// ReportTime is when the member wrote this report. A member whose last
	// report is older than the hub's threshold is silent.
	ReportTime *metav1.Time `json:"reportTime,omitempty"`
	// ServedRevision is the highest hub resourceVersion among the global
	// sources the member serves ("" before it has read the hub). It is
	// a number as the hub's kube-apiserver issued it; compare per source
	// (Sources) to know what the member lacks.
	ServedRevision string `json:"servedRevision,omitempty"`
	// StaleSince is set while the member can't read the hub: since then it
	// serves its last known sources (fail-static).
	StaleSince *metav1.Time `json:"staleSince,omitempty"`
	// Namespaces counts the member's tenants: the namespaces that inherit
	// the global scope.
	Namespaces int32 `json:"namespaces"`
	// Sources are the hub's global sources the member serves, candidates
	// excluded, with how many of its namespaces inherit each.
	Sources []SourceReport `json:"sources,omitempty"`
	// Candidates are the hub's candidates the member knows, with their
	// share in this member.
	Candidates []CandidateReport `json:"candidates,omitempty"`
}

// SourceReport is one hub source as a member serves it.
type SourceReport struct {
	// Resource is the source kind's resource, "rolebindings.rbac.authorization.k8s.io"
	// (resource.group; the core group's resources have no dot).
	Resource string `json:"resource"`
	// Name is the source's name in the hub's global namespace.
	Name string `json:"name"`
	// ResourceVersion is the hub resourceVersion the member serves.
	ResourceVersion string `json:"resourceVersion"`
	// Namespaces counts the member's namespaces whose view holds the
	// source's item (from the global scope).
	Namespaces int32 `json:"namespaces"`
}

// CandidateReport is one hub candidate as a member applies it.
type CandidateReport struct {
	// Resource is as SourceReport's.
	Resource string `json:"resource"`
	// Name is the candidate's own name; For the stable source's.
	Name string `json:"name"`
	For  string `json:"for"`
	// ResourceVersion is the hub resourceVersion the member serves.
	ResourceVersion string `json:"resourceVersion"`
	// InCluster is whether the candidate's implicit.dev/canary-clusters
	// (absent: every member) selects this member's registered labels. A
	// candidate not in the cluster reaches none of its namespaces, and is
	// not audited there.
	InCluster bool `json:"inCluster"`
	// CanaryNamespaces counts the member's namespaces that see the
	// candidate instead of the stable source.
	CanaryNamespaces int32 `json:"canaryNamespaces"`
	// StableNamespaces counts the member's namespaces that inherit the
	// stable source (or would, for a staged creation) and don't see the
	// candidate.
	StableNamespaces int32 `json:"stableNamespaces"`
	// AuditDifferences counts the authorization decisions the candidate
	// would have changed in this member since the member's server started
	// (RoleBinding candidates only; names stay behind the member's
	// CandidateAudit permission).
	AuditDifferences int64 `json:"auditDifferences"`
}
