package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// CandidateAudit asks what the authorization webhook has recorded of the
// candidates of one stable RoleBinding of the namespace (the
// CandidateAudit's): the requests it answered that the candidate, outside
// its canaries, would have answered otherwise. Create it, and the answer
// comes back in its status. It is never stored. The answer is one
// replica's: each records the requests it answers itself.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type CandidateAudit struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CandidateAuditSpec   `json:"spec"`
	Status CandidateAuditStatus `json:"status,omitempty"`
}

// CandidateAuditSpec names the stable source.
type CandidateAuditSpec struct {
	// Resource is the source's resource, group-qualified; only
	// rolebindings.rbac.authorization.k8s.io is audited (the default).
	Resource string `json:"resource,omitempty"`
	// Name is the stable source's name.
	Name string `json:"name"`
}

// CandidateAuditStatus is the answer.
type CandidateAuditStatus struct {
	// Replica is the host name of the replica that answered.
	Replica string `json:"replica"`
	// ReplicaStartTime is when it started recording.
	ReplicaStartTime metav1.Time `json:"replicaStartTime"`
	// Scope says whose requests are counted: this replica's.
	Scope string `json:"scope"`
	// Candidates are the candidates for the name, audited or not.
	// +listType=atomic
	Candidates []CandidateAuditRecord `json:"candidates,omitempty"`
}

// CandidateAuditRecord is what the replica recorded of one candidate.
type CandidateAuditRecord struct {
	// Name and UID are the candidate's.
	Name string `json:"name"`
	UID  string `json:"uid"`
	// Problem says why the candidate is not audited, if it is not.
	Problem string `json:"problem,omitempty"`
	// Since is when the replica judged its first request for it.
	Since *metav1.Time `json:"since,omitempty"`
	// Judged counts the requests decided a second time with the candidate.
	Judged int64 `json:"judged"`
	// WouldDeny counts requests allowed that the candidate would not allow;
	// WouldAllow requests it would allow that got no opinion (denied).
	WouldDeny  int64 `json:"wouldDeny"`
	WouldAllow int64 `json:"wouldAllow"`
	// Keys count the differences by namespace, user, verb, resource and
	// direction, most first: a bounded number of keys; the differences of
	// the others are in OthersWouldDeny and OthersWouldAllow.
	// +listType=atomic
	Keys             []AuditKeyCount `json:"keys,omitempty"`
	OthersWouldDeny  int64           `json:"othersWouldDeny"`
	OthersWouldAllow int64           `json:"othersWouldAllow"`
	// Samples are the latest differences, oldest first.
	// +listType=atomic
	Samples []AuditSample `json:"samples,omitempty"`
	// Withheld says why the keys and samples are left out, if they are:
	// the differences are then all counted as others.
	Withheld string `json:"withheld,omitempty"`
}

// AuditKeyCount counts the differences of one key.
type AuditKeyCount struct {
	Namespace string `json:"namespace"`
	User      string `json:"user"`
	Verb      string `json:"verb"`
	Resource  string `json:"resource"`
	// Direction is WouldDeny or WouldAllow.
	Direction string `json:"direction"`
	Count     int64  `json:"count"`
}

// AuditSample is one difference as it was seen.
type AuditSample struct {
	Time      metav1.Time `json:"time"`
	Namespace string      `json:"namespace"`
	User      string      `json:"user"`
	// Groups are the requester's groups, summarized.
	// +listType=atomic
	Groups    []string `json:"groups,omitempty"`
	Verb      string   `json:"verb"`
	Resource  string   `json:"resource"`
	Name      string   `json:"name,omitempty"`
	Direction string   `json:"direction"`
	// Given is the reason of the answer given (empty: no opinion);
	// Candidate the reason of the candidate's.
	Given     string `json:"given,omitempty"`
	Candidate string `json:"candidate,omitempty"`
}
