package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Hierarchy is where one namespace stands in the hierarchy: its ancestors,
// its children and the problems found on the way up. Each namespace has one,
// named like it. It is read-only, computed on read.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type Hierarchy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status HierarchyStatus `json:"status"`
}

// HierarchyStatus is a namespace's place in the hierarchy.
type HierarchyStatus struct {
	// Tenant is false for namespaces that inherit nothing: the global
	// namespace, excluded ones and those labeled implicit.dev/inherit: "false".
	Tenant bool `json:"tenant"`
	// NotTenant says why a namespace that is not a tenant is not one:
	// Global (a global namespace, whose sources the tenants inherit),
	// Excluded (kept out by the server: --exclude-namespaces, its own
	// namespace) or OptedOut (labeled implicit.dev/inherit: "false").
	NotTenant string `json:"notTenant,omitempty"`
	// Parent is the namespace's implicit.dev/parent label, whether or not it
	// is inherited from.
	Parent string `json:"parent,omitempty"`
	// Ancestors are the namespaces inherited from, nearest first.
	// +listType=atomic
	Ancestors []string `json:"ancestors,omitempty"`
	// Children are the namespaces that name this one as parent and inherit
	// from it, sorted.
	// +listType=atomic
	Children []string `json:"children,omitempty"`
	// Problems found walking up from the namespace: at most one, where the
	// walk stopped.
	// +listType=atomic
	Problems []HierarchyProblem `json:"problems,omitempty"`
}

// Why a namespace is not a tenant (HierarchyStatus.NotTenant).
const (
	NotTenantGlobal   = "Global"
	NotTenantExcluded = "Excluded"
	NotTenantOptedOut = "OptedOut"
)

// HierarchyProblem is a cycle, a missing or invalid parent, a parent that is
// not the namespace the label meant, or a lineage deeper than the limit.
type HierarchyProblem struct {
	// Reason: Cycle, MissingParent, InvalidParent, ParentUIDMismatch or DepthExceeded.
	Reason string `json:"reason"`
	// Namespace carries the offending parent label.
	Namespace string `json:"namespace"`
	// Parent is the label's value (for DepthExceeded: the nearest ancestor cut off).
	Parent string `json:"parent,omitempty"`
	// Cycle lists the namespaces of a cycle, in parent order.
	// +listType=atomic
	Cycle []string `json:"cycle,omitempty"`
	// Message says it in words.
	Message string `json:"message"`
}

// HierarchyList is a list of Hierarchies.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type HierarchyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []Hierarchy `json:"items"`
}

// Explanation asks why an item is, or is not, in the view of a namespace (the
// Explanation's): create it, and the answer comes back in its status. Like a
// SelfSubjectAccessReview it is never stored. Creating one needs get on the
// view resource in the namespace.
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type Explanation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ExplanationSpec   `json:"spec"`
	Status ExplanationStatus `json:"status,omitempty"`
}

// ExplanationSpec names the view item asked about.
type ExplanationSpec struct {
	// Resource is the view resource: rolebindings, networkpolicies, ...
	Resource string `json:"resource"`
	// Name is the item's name; it need not be in the view.
	Name string `json:"name"`
}

// Outcomes of a scope's item in an explanation.
const (
	// OutcomeWon: the item is the view's (the base, with overlays on top).
	OutcomeWon = "Won"
	// OutcomeShadowed: a lower scope's item of the same name replaced it.
	OutcomeShadowed = "Shadowed"
	// OutcomeOverlaid: the item is merged onto the inherited one.
	OutcomeOverlaid = "Overlaid"
	// OutcomeBlockedByLock: the item could not shadow a locked inherited one.
	OutcomeBlockedByLock = "BlockedByLock"
	// OutcomeExcluded: a lower scope's exclusion removed it.
	OutcomeExcluded = "Excluded"
	// OutcomeNoItem: the scope holds no item of that name.
	OutcomeNoItem = "NoItem"
)

// ExplanationStatus is the answer.
type ExplanationStatus struct {
	// InView says whether the view holds the item.
	InView bool `json:"inView"`
	// Tenant is false when the namespace inherits nothing: its view holds
	// its local objects only, and Scopes has the local one only.
	Tenant bool `json:"tenant"`
	// Winner is the source the view item comes from, if any.
	Winner *ItemReference `json:"winner,omitempty"`
	// Overlays are the sources merged onto the winner, top down.
	// +listType=atomic
	Overlays []ItemReference `json:"overlays,omitempty"`
	// Conflicts are what a lock blocked (the item's implicit.dev/conflict).
	// +listType=atomic
	Conflicts []string `json:"conflicts,omitempty"`
	// Scopes are every scope of the view, from global down to the
	// namespace itself, with what each held and what became of it.
	// +listType=atomic
	Scopes []ScopeExplanation `json:"scopes,omitempty"`
	// HierarchyProblem is the problem that cut the namespace's lineage short, if any.
	HierarchyProblem string `json:"hierarchyProblem,omitempty"`
	// Summary says in one sentence why the item is or is not in the view.
	Summary string `json:"summary"`
}

// ItemReference names a source object.
type ItemReference struct {
	// Namespace is the source's namespace.
	Namespace string `json:"namespace"`
	// Name is the source's name.
	Name string `json:"name"`
	// Scope is the source's scope from the viewing namespace.
	Scope string `json:"scope,omitempty"`
	// Locked: annotated implicit.dev/locked: "true".
	Locked bool `json:"locked,omitempty"`
}

// ScopeExplanation is one scope of the view.
type ScopeExplanation struct {
	// Scope: global, parent or local.
	Scope string `json:"scope"`
	// Namespace is the scope's namespace.
	Namespace string `json:"namespace"`
	// Item is the scope's item of that name, if any.
	Item *ItemReference `json:"item,omitempty"`
	// Outcome is what became of Item (see the Outcome constants).
	Outcome string `json:"outcome"`
	// By is the namespace whose item or exclusion decided the outcome:
	// the shadowing item's, the lock's, the exclusion's.
	By string `json:"by,omitempty"`
	// Exclusions are the exclusions this scope's namespace declares that
	// match the name, and what each did.
	// +listType=atomic
	Exclusions []ExclusionEffect `json:"exclusions,omitempty"`
	// Message says it in words.
	Message string `json:"message,omitempty"`
}

// ExclusionEffect is what one exclusion did.
type ExclusionEffect struct {
	// Exclusion as declared: resource/name or resource/*.
	Exclusion string `json:"exclusion"`
	// Effect: Removed (an inherited item), BlockedByLock,
	// BlockedByExceptionRules (the source requires an approved exception,
	// or one with an end, and this is not one), or NothingInherited.
	Effect string `json:"effect"`
	// Item is the inherited item it removed or could not remove.
	Item *ItemReference `json:"item,omitempty"`
	// Exception names the exception that declares it ("" for
	// implicit.dev/exclude).
	Exception string `json:"exception,omitempty"`
	// Ends is that exception's end, if it has one.
	Ends *metav1.Time `json:"ends,omitempty"`
	// Blocked says why an exclusion BlockedByExceptionRules did not apply.
	Blocked string `json:"blocked,omitempty"`
}

// Effects of an exclusion.
const (
	EffectRemoved          = "Removed"
	EffectBlockedByLock    = "BlockedByLock"
	EffectNothingInherited = "NothingInherited"
	// EffectBlockedByExceptionRules: the source requires an approved
	// exception, or one with an end, and the exclusion is not one.
	EffectBlockedByExceptionRules = "BlockedByExceptionRules"
)

// Preview asks what an edit of one source object would change in the views:
// create it in the source's namespace, and the answer comes back in its
// status. It is never stored. Creating one needs the permission the edit
// itself needs (create, update or delete of the source).
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type Preview struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PreviewSpec   `json:"spec"`
	Status PreviewStatus `json:"status,omitempty"`
}

// PreviewSpec is the edit: a proposed object (create or update) or the name
// of a source to delete.
type PreviewSpec struct {
	// Resource is the view resource of the source kind: rolebindings, ...
	Resource string `json:"resource"`
	// Object is the proposed source object, as JSON of the source kind.
	// Its namespace, if set, must be the Preview's. It may instead be a
	// v1 Namespace named as the Preview's namespace: the preview then
	// tells how the views of resource in that namespace and its subtree
	// would change with the Namespace's new labels and annotations (its
	// parent, tenancy, stage or exclusions), item by item.
	// +kubebuilder:pruning:PreserveUnknownFields
	Object *runtime.RawExtension `json:"object,omitempty"`
	// Delete names the source object to delete.
	Delete string `json:"delete,omitempty"`
}

// Operations of a preview.
const (
	OperationCreate = "Create"
	OperationUpdate = "Update"
	OperationDelete = "Delete"
)

// Change types of a namespace's view item.
const (
	ChangeAdded    = "Added"
	ChangeModified = "Modified"
	ChangeDeleted  = "Deleted"
)

// Reasons a namespace's view stays unchanged.
const (
	UnchangedLocked   = "Locked"
	UnchangedShadowed = "Shadowed"
	UnchangedExcluded = "Excluded"
)

// PreviewStatus is the answer.
type PreviewStatus struct {
	// Operation is Create, Update or Delete.
	Operation string `json:"operation"`
	// Name is the source's name.
	Name string `json:"name"`
	// Reached is the edit's reach: how many namespaces other than the
	// source's own would see their view item change (those a lock, a
	// shadow or an exclusion keeps unchanged are not reached). The
	// fan-out warning counts the same.
	Reached int `json:"reached"`
	// Changed are the namespaces whose view item would change, sorted.
	// +listType=atomic
	Changed []NamespaceChange `json:"changed,omitempty"`
	// Unchanged are the namespaces a lock, a shadow or an exclusion keeps
	// unchanged, sorted.
	// +listType=atomic
	Unchanged []NamespaceUnchanged `json:"unchanged,omitempty"`
	// Hidden is how many namespaces are left out of Changed and Unchanged
	// because the requester may not get this view item there: a preview
	// names only what the requester may read.
	Hidden int `json:"hidden,omitempty"`
}

// NamespaceChange is how one namespace's view item would change.
type NamespaceChange struct {
	// Namespace is the viewing namespace.
	Namespace string `json:"namespace"`
	// Name is the view item's name, set in the preview of a Namespace,
	// whose changes are of several items.
	Name string `json:"name,omitempty"`
	// Type: Added, Modified or Deleted.
	Type string `json:"type"`
	// Before and After summarize the view item (nil: not in the view).
	Before *ItemSummary `json:"before,omitempty"`
	// After is the view item after the edit.
	After *ItemSummary `json:"after,omitempty"`
}

// ItemSummary is where a view item comes from.
type ItemSummary struct {
	// Source is the winning source.
	Source ItemReference `json:"source"`
	// Overlays are the sources merged on top, namespace/name.
	// +listType=atomic
	Overlays []string `json:"overlays,omitempty"`
	// Conflict is what a lock blocked.
	Conflict string `json:"conflict,omitempty"`
	// Content is what a reader of the view item sees change: its labels,
	// its annotations and every field but metadata, as JSON (kubectl
	// implicit diff prints a field diff of it).
	// +kubebuilder:pruning:PreserveUnknownFields
	Content *runtime.RawExtension `json:"content,omitempty"`
}

// NamespaceUnchanged is a namespace the edit reaches whose view stays as it is.
type NamespaceUnchanged struct {
	// Namespace is the viewing namespace.
	Namespace string `json:"namespace"`
	// Reason: Locked, Shadowed or Excluded.
	Reason string `json:"reason"`
	// By is the namespace of the lock, the shadowing item or the exclusion.
	By string `json:"by"`
}

// RulesReview asks what a user may do in a namespace (the RulesReview's)
// through inherited RoleBindings: create it, and the answer comes back in
// its status, like a SelfSubjectRulesReview's. It is never stored. It
// reviews the requester, unless the spec names another user, whom the
// requester must be allowed to impersonate (with each group named).
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type RulesReview struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RulesReviewSpec   `json:"spec"`
	Status RulesReviewStatus `json:"status,omitempty"`
}

// RulesReviewSpec names whom to review: empty for the requester.
type RulesReviewSpec struct {
	// User is the user to review instead of the requester; the requester
	// needs impersonate on the user (and on each group).
	User string `json:"user,omitempty"`
	// Groups are the user's groups; they need User.
	// +listType=atomic
	Groups []string `json:"groups,omitempty"`
}

// RulesReviewStatus is the answer.
type RulesReviewStatus struct {
	// User is whom the rules were computed for.
	User string `json:"user"`
	// Groups are the user's groups.
	// +listType=atomic
	Groups []string `json:"groups,omitempty"`
	// Rules are the rules inherited bindings grant in the namespace, each
	// with the binding it comes from; the namespace's own bindings are
	// kube-apiserver's RBAC's (a SelfSubjectRulesReview lists them).
	// +listType=atomic
	Rules []InheritedRule `json:"rules,omitempty"`
}

// InheritedRule is one rule an inherited RoleBinding grants.
type InheritedRule struct {
	// Verbs are the rule's verbs.
	// +listType=atomic
	Verbs []string `json:"verbs"`
	// APIGroups are the rule's API groups.
	// +listType=atomic
	APIGroups []string `json:"apiGroups,omitempty"`
	// Resources are the rule's resources.
	// +listType=atomic
	Resources []string `json:"resources,omitempty"`
	// ResourceNames are the names the rule is restricted to.
	// +listType=atomic
	ResourceNames []string `json:"resourceNames,omitempty"`
	// Binding is the inherited RoleBinding's source, with its scope from
	// the namespace (parent or global).
	Binding ItemReference `json:"binding"`
	// Candidate names the candidate the view shows in the binding's place.
	Candidate string `json:"candidate,omitempty"`
	// Role is the role the binding's roleRef resolves to, as RBAC resolves
	// it where the binding is written.
	Role RoleReference `json:"role"`
}

// RoleReference names a resolved role: a ClusterRole (no namespace) or a
// Role in the binding's own source namespace.
type RoleReference struct {
	// Kind is ClusterRole or Role.
	Kind string `json:"kind"`
	// Namespace is the Role's namespace; empty for a ClusterRole.
	Namespace string `json:"namespace,omitempty"`
	// Name is the role's name.
	Name string `json:"name"`
}
