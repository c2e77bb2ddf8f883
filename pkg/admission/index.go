package admission

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/implicit-dev/implicit-apiserver/pkg/admission/whatif"
	"github.com/implicit-dev/implicit-apiserver/pkg/merge"
)

// The what-if index lives in package whatif; these names keep the guards'
// code and its callers reading as before.
type (
	// MuxIndex is the guards' index over the mirror.
	MuxIndex = whatif.Index
	// Views is what the index reads the sources through: *watchmux.Mux.
	Views = whatif.Views
	// NamespaceMeta, Assumed, LockedItem, Pending, SourceRef
	// and CandidateSource are the index's questions' terms.
	NamespaceMeta   = whatif.NamespaceMeta
	Assumed         = whatif.Assumed
	LockedItem      = whatif.LockedItem
	Pending         = whatif.Pending
	SourceRef       = whatif.SourceRef
	CandidateSource = whatif.CandidateSource
)

var _ Index = &MuxIndex{}

// NewIndex returns the index of the guards that reads views.
func NewIndex(views Views) *MuxIndex { return whatif.New(views) }

// lockedKey names a locked item, or with no name every item of a
// namespace's resource.
type lockedKey struct {
	resource, namespace, name string
}

// Index is what the guards read of the sources: *whatif.Index.
type Index interface {
	// Reach counts the namespaces whose view of resource changes if the
	// source namespace/name becomes obj (nil: deleted).
	Reach(resource, namespace, name string, obj runtime.Object) (int, error)
	// InheritedReach is Reach without the source's own namespace: the
	// namespaces that inherit the source, as every reach is counted.
	InheritedReach(resource, namespace, name string, obj runtime.Object) (int, error)
	// DeletionLosers lists the namespaces whose views hold items of
	// namespace or of its ancestors that deleting namespace takes away.
	DeletionLosers(namespace string) ([]string, error)
	// Inherited is the item namespace's view would show for name without an
	// object of its own.
	Inherited(resource, namespace, name string) (merge.Result, bool, error)
	// Overlays reports whether an object with annotations would be merged
	// onto the inherited item as an overlay rather than shadow it.
	Overlays(resource string, inherited merge.Result, annotations map[string]string) bool
	// HasDescendants reports whether a namespace names namespace as parent.
	HasDescendants(namespace string) bool
	// Exists reports whether namespace exists; IsTenant whether it exists
	// and is a tenant.
	Exists(namespace string) bool
	IsTenant(namespace string) bool
	// ParentCycleAssuming is the cycle a new parent would close, or nil,
	// with the changes the guards admitted assumed.
	ParentCycleAssuming(namespace, parent string, assumed Assumed) []string
	// LockedLoss lists the locked items that would leave the views of
	// namespace and its subtree if its labels and annotations became next.
	// pending are the source writes admitted a moment ago.
	LockedLossPending(namespace string, next NamespaceMeta, assumed Assumed, pending Pending) ([]LockedItem, error)
	// LockedStandIns lists, for resources, the locked items namespace or
	// its subtree would newly inherit under a name it holds an object of.
	LockedStandIns(namespace string, next NamespaceMeta, assumed Assumed, resources []string, pending Pending) ([]LockedItem, error)
	// ObjectsUnderLock lists the namespaces that would inherit the source
	// namespace/name, locked as obj, while holding an object of that name.
	// holders are namespaces known to hold one that the mirror may not
	// show yet.
	ObjectsUnderLock(resource, namespace, name string, obj *unstructured.Unstructured, holders []string) ([]string, error)
	// LockedUnderLock lists the locked sources of other namespaces that the
	// source namespace/name, locked as obj, would displace.
	LockedUnderLock(resource, namespace, name string, obj *unstructured.Unstructured, pending Pending) ([]LockedItem, error)
	// DeletionLoss lists the locked items that would leave other
	// namespaces' views if namespace were deleted.
	DeletionLoss(namespace string, assumed Assumed) ([]LockedItem, error)
	// NamespaceMeta is the labels and annotations the mirror holds of
	// namespace (found: it holds the namespace).
	NamespaceMeta(namespace string) (meta NamespaceMeta, found bool)
	// InheritedAssuming is Inherited with assumed applied; a namespace
	// nobody knows yet is taken as a new tenant with no labels.
	InheritedAssuming(resource, namespace, name string, assumed Assumed, pending Pending) (merge.Result, bool, error)
	// SourceLocked reports whether the source namespace/name is locked.
	SourceLocked(resource, namespace, name string) (bool, error)
	// Terminating reports whether namespace is being deleted.
	Terminating(namespace string) bool
	// GoingAway is the first namespace from namespace up its parent labels
	// (namespace included) whose deletion has begun: Terminating in the
	// mirror, or assumed gone. "" when none is.
	GoingAway(namespace string, assumed Assumed) string
	// GoingAwayBelow is the first namespace of namespace's subtree
	// (namespace included) that is being deleted while namespaces below
	// it still inherit through it, or "".
	GoingAwayBelow(namespace string, assumed Assumed) string
	// Candidates lists the candidates among namespace's sources of
	// resource, sorted by name.
	Candidates(resource, namespace string) ([]CandidateSource, error)
	// SourceObject is the object of the source namespace/name.
	SourceObject(resource, namespace, name string) (any, bool, error)
	// CandidateReach counts the namespaces that would inherit c's stable
	// name from namespace with the candidate obj standing in for it (of),
	// and those of them whose implicit.dev/stage c's selector matches
	// (reached).
	CandidateReach(resource, namespace string, obj *unstructured.Unstructured, c *merge.Candidate) (reached, of int, err error)
}
