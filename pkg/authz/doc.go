// Package authz makes inherited RoleBindings grant access: it answers
// kube-apiserver's authorization webhook (SubjectAccessReview v1) from the
// merged views. A namespaced resource request is allowed when an inherited
// (global or parent) RoleBinding in the namespace's view grants it, with the
// roleRef resolved as RBAC resolves it where the binding is written: a
// ClusterRole, or the real Role in the binding's own namespace, never one
// that namespace only inherits.
// kube-apiserver's bind check of a RoleBinding write is answered as RBAC's
// escalation check would, with the inherited rules counted (delegation.go).
// RulesFor lists a user's inherited rules in a namespace, binding by binding,
// with the code the decisions are made with (review.go): the answer of
// rulesreviews.implicit.dev.
// Anything else gets no opinion, never a denial: kube-apiserver's own RBAC
// decides local RoleBindings, and an outage only withdraws inherited access.
//
// Rule and subject matching follow kube-apiserver's RBAC authorizer
// (k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac), written here since
// the product must not import k8s.io/kubernetes: see rules.go.
//
// Decisions are made in memory from the watch multiplexer's mirror and a
// ClusterRole cache, and kept in an LRU cache keyed by the request and the
// generation of every view they read, so a change that could alter an
// answer makes the cached one unreachable at once; one that resolved a Role
// is used only while the mirror holds that Role's version it read. The cache is bounded in
// entries and in estimated bytes, and never keeps a request whose key is
// longer than MaxCachedKeyBytes: whoever may ask can't fill memory with
// long, unique requests (cache.go).
//
// Where a candidate RoleBinding is open above a namespace outside its
// canaries, each request is decided a second time as if the namespace saw
// the candidate, the answer given unchanged, and the differences recorded,
// bounded, per candidate (shadow.go, audit.go): the audit before enforce
// that candidateaudits.implicit.dev and kubectl implicit rollout status show.
//
// The webhook's transport (who may call it, the review's decoding and
// writing, its request metrics) is pkg/webhook's, shared with the admission
// guards.
//
// It builds on pkg/merge, pkg/watchmux and pkg/webhook, and must not import
// pkg/registry, pkg/views, pkg/admission or pkg/apiserver: pkg/registry
// serves its rules through an interface of its own.
package authz
