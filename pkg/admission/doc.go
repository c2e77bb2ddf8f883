// Package admission owns the guards of implicit changes: the admission
// webhooks implicit-apiserver serves to kube-apiserver, one path and webhook
// per guard (webhooks.go). Each decides a request from the watch
// multiplexer's mirror (Index) and SubjectAccessReviews of the requester,
// and changes nothing; ConditionSync keeps the webhooks' match conditions
// current. docs/design.md ("Guards") lists what each guard decides.
package admission
