package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// ExceptionSpec is one exception a namespace declares, an entry of its
// AnnotationExceptions: inherited items it removes from the namespace's view
// and its subtree's, why, who asked, and until when.
type ExceptionSpec struct {
	// Name names the exception within its namespace (a DNS-1123 label).
	Name string `json:"name"`
	// Exclude lists the inherited items excepted, in AnnotationExclude's
	// forms: "<resource>/<name>" or "<resource>/*".
	// +listType=atomic
	Exclude []string `json:"exclude"`
	// Reason says why (free text: a ticket, a sentence). Required.
	Reason string `json:"reason"`
	// RequestedBy is the user who wrote this version of the exception; the
	// guards refuse any other value.
	RequestedBy string `json:"requestedBy"`
	// ExpiresAt is the exception's end, if any. Required, and bounded, where
	// a source it excepts says so (AnnotationExceptionMaxDuration).
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
}

// ExceptionApproval approves one version of an exception, an entry of a
// namespace's AnnotationExceptionApprovals.
type ExceptionApproval struct {
	// By is the approver, who may "approve" on the sources below and is not
	// the exception's requester.
	By string `json:"by"`
	// At is when the approval was written.
	At metav1.Time `json:"at"`
	// Digest is the approved version's (ExceptionDigest): editing the
	// exception makes it requested again.
	Digest string `json:"digest"`
	// Sources are the namespaces (with "<cluster>/" for a hub's) whose
	// sources' items the approval covers: where the approver was allowed
	// "approve" on them.
	// +listType=atomic
	Sources []string `json:"sources"`
}

// The states of an exception (ExceptionStatus.State).
const (
	// ExceptionRequested: an item it names needs an approval it lacks, for
	// this version of it; that item stays in the views.
	ExceptionRequested = "Requested"
	// ExceptionActive: in effect.
	ExceptionActive = "Active"
	// ExceptionExpired: the server marked it expired at its end; in effect
	// nowhere.
	ExceptionExpired = "Expired"
)

// Exception is an exception a namespace declares, as implicit.dev serves it
// (exceptions.implicit.dev, read-only): its spec as the namespace's
// annotation holds it and its state.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type Exception struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ExceptionSpec   `json:"spec"`
	Status ExceptionStatus `json:"status"`
}

// ExceptionStatus is an exception's state, read from its namespace's
// annotations (never from a clock).
type ExceptionStatus struct {
	// State is Requested, Active or Expired.
	State string `json:"state"`
	// Digest is this version's (ExceptionDigest).
	Digest string `json:"digest"`
	// Approval is the approval of this version, if any.
	Approval *ExceptionApproval `json:"approval,omitempty"`
	// NeedsApproval lists the inherited items it names whose sources require
	// an approval this version lacks, as "<resource> <namespace>/<name>".
	// +listType=atomic
	NeedsApproval []string `json:"needsApproval,omitempty"`
}

// ExceptionList is a list of Exceptions.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type ExceptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Exception `json:"items"`
}

// TimeLeft says how long the exception has left at now, as its tables
// show it: "-" without an end, "expired" once marked, "ending" past its
// end until the server marks it, else the time left ("6d23h").
func (e *Exception) TimeLeft(now time.Time) string {
	switch {
	case e.Status.State == ExceptionExpired:
		return "expired"
	case e.Spec.ExpiresAt == nil:
		return "-"
	case !e.Spec.ExpiresAt.After(now):
		return "ending"
	}
	return duration.HumanDuration(e.Spec.ExpiresAt.Sub(now))
}
